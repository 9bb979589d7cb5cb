// A small Markdown renderer that builds DOM nodes and never parses HTML.
// Everything the model says becomes text nodes, so no markup or script in it can take effect;
// links are kept only for http(s) and mailto URLs and say where they go; images are never
// loaded, only linked. Characters that reorder text show as escapes (a reply could spoof a
// path with them); in code, where names and commands are, every hidden character does.

import { visible } from "./visible.js";

const SAFE_URL = /^(https?:|mailto:)/i;
// Underscores emphasise only at word edges, as in CommonMark: my_var_name and
// test_chat_story.py are names, not emphasis.
const INLINE =
  /(`+)([\s\S]*?[^`])\1(?!`)|\*\*([\s\S]+?)\*\*|(?<![\p{L}\p{N}_])__([\s\S]+?)__(?![\p{L}\p{N}_])|\*([^*\s](?:[^*]*[^*\s])?)\*|(?<![\p{L}\p{N}_])_([^_\s](?:[^_]*[^_\s])?)_(?![\p{L}\p{N}_])|!\[([^\]]*)\]\(([^)\s]+)\)|\[([^\]]+)\]\(([^)\s]+)\)/gu;

function el(tag, ...children) {
  const node = document.createElement(tag);
  node.append(...children);
  return node;
}

function prose(text) {
  return visible(text, { prose: true });
}

/**
 * A link to `url` showing `children`, the full URL on hover and, unless the text is the host
 * itself, the host beside it: a reader sees where it goes, and a secret in it, before a click.
 * Null for a URL that is not http(s) or mailto.
 */
function link(url, children, className) {
  if (!SAFE_URL.test(url) || !URL.canParse(url)) return null;
  const target = new URL(url);
  const a = el("a", ...children);
  a.href = target.href;
  a.title = target.href;
  a.target = "_blank";
  a.rel = "noopener noreferrer nofollow";
  if (className) a.className = className;
  const where = target.protocol === "mailto:" ? target.pathname : target.host;
  if (a.textContent.trim().toLowerCase() === where.toLowerCase()) return [a];
  const host = el("small", ...visible(`(${where})`));
  host.className = "link-host";
  return [a, " ", host];
}

function inline(text) {
  const nodes = [];
  let last = 0;
  for (const m of text.matchAll(INLINE)) {
    if (m.index > last) nodes.push(...lineBreaks(text.slice(last, m.index)));
    const [whole, , code, bold1, bold2, em1, em2, alt, src, label, url] = m;
    let made = null;
    if (code !== undefined) made = [el("code", ...visible(code))];
    else if (bold1 !== undefined || bold2 !== undefined) made = [el("strong", ...inline(bold1 ?? bold2))];
    else if (em1 !== undefined || em2 !== undefined) made = [el("em", ...inline(em1 ?? em2))];
    else if (src !== undefined) made = link(src, prose(alt ? `[image: ${alt}]` : "[image]"), "image-link");
    else if (label !== undefined) made = link(url, inline(label));
    nodes.push(...(made ?? prose(whole)));
    last = m.index + whole.length;
  }
  if (last < text.length) nodes.push(...lineBreaks(text.slice(last)));
  return nodes;
}

function lineBreaks(text) {
  const nodes = [];
  text.split("\n").forEach((line, i) => {
    if (i) nodes.push(document.createElement("br"));
    if (line) nodes.push(...prose(line));
  });
  return nodes;
}

const FENCE = /^\s*(```|~~~)\s*([\w+-]*)\s*$/;
const HEADING = /^(#{1,6})\s+(.*?)\s*#*\s*$/;
const BULLET = /^\s*[-*+]\s+(.*)$/;
const NUMBERED = /^\s*(\d+)[.)]\s+(.*)$/;
const QUOTE = /^\s*>\s?(.*)$/;
const RULE = /^\s*([-*_])(\s*\1){2,}\s*$/;

/** Render Markdown `text` into `container`, replacing its children. */
export function renderMarkdown(text, container) {
  container.replaceChildren(...blocks(text.split(/\r?\n/)));
}

/**
 * Render a reply that is still growing into `container`, with the same result as
 * renderMarkdown. A blank line outside a code fence ends every block, so what comes before
 * the last such line is rendered once and kept; only the part after it is rendered again.
 * Re-rendering the whole reply each frame made a long reply stall the page.
 */
export function renderGrowingMarkdown(text, container) {
  const state = (container.markdown ??= { done: 0, tail: [] });
  let cut = state.done;
  let fence = null;
  let position = state.done;
  const lines = text.slice(state.done).split("\n");
  for (const line of lines.slice(0, -1)) {
    position += line.length + 1;
    const opening = fence === null && line.match(FENCE);
    if (opening) fence = opening[1];
    else if (fence !== null && line.trim().startsWith(fence)) fence = null;
    else if (fence === null && !line.trim()) cut = position;
  }
  for (const node of state.tail) node.remove();
  if (cut > state.done) {
    container.append(...blocks(text.slice(state.done, cut).split(/\r?\n/)));
    state.done = cut;
  }
  state.tail = blocks(text.slice(state.done).split(/\r?\n/));
  container.append(...state.tail);
}

function blocks(lines) {
  const out = [];
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    let m;
    if (!line.trim()) {
      i++;
    } else if ((m = line.match(FENCE))) {
      const body = [];
      i++;
      while (i < lines.length && !lines[i].trim().startsWith(m[1])) body.push(lines[i++]);
      i++; // the closing fence (absent while a reply is still streaming)
      const code = el("code", ...visible(body.join("\n")));
      if (m[2]) code.dataset.lang = m[2];
      out.push(el("pre", code));
    } else if ((m = line.match(HEADING))) {
      out.push(el(`h${Math.min(m[1].length + 2, 6)}`, ...inline(m[2])));
      i++;
    } else if (RULE.test(line)) {
      out.push(document.createElement("hr"));
      i++;
    } else if (BULLET.test(line) || NUMBERED.test(line)) {
      const ordered = !BULLET.test(line);
      const pattern = ordered ? NUMBERED : BULLET;
      const list = document.createElement(ordered ? "ol" : "ul");
      if (ordered) list.start = Number(line.match(NUMBERED)[1]);
      while (i < lines.length && pattern.test(lines[i])) {
        const itemLines = [lines[i].match(pattern).at(-1)];
        i++;
        while (i < lines.length && /^\s{2,}\S/.test(lines[i]) && !pattern.test(lines[i])) {
          itemLines.push(lines[i++].trim());
        }
        list.append(el("li", ...inline(itemLines.join("\n"))));
      }
      out.push(list);
    } else if (QUOTE.test(line)) {
      const quoted = [];
      while (i < lines.length && QUOTE.test(lines[i])) quoted.push(lines[i++].match(QUOTE)[1]);
      out.push(el("blockquote", ...blocks(quoted)));
    } else {
      const para = [];
      while (
        i < lines.length &&
        lines[i].trim() &&
        !FENCE.test(lines[i]) &&
        !HEADING.test(lines[i]) &&
        !BULLET.test(lines[i]) &&
        !NUMBERED.test(lines[i]) &&
        !QUOTE.test(lines[i])
      ) {
        para.push(lines[i++]);
      }
      out.push(el("p", ...inline(para.join("\n"))));
    }
  }
  return out;
}
