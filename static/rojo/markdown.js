// Markdown for the model's replies: markdown-it (raw HTML off) parses it, highlight.js colours
// code, DOMPurify keeps only the tags a reply needs, and the result is finished as DOM nodes.
// No markup or script in a reply can take effect; links are kept only for http(s) and mailto
// URLs and say where they go; images are never loaded, only linked. Characters that reorder
// text show as escapes (a reply could spoof a path with them); in code, every hidden one does.
// Math is typeset by KaTeX (math.js) and complete ```mermaid blocks drawn by Mermaid
// (diagrams.js), both loaded with the first reply that needs them.

import DOMPurify from "../vendor/dompurify/purify.es.mjs";
import hljs from "../vendor/highlight.js/highlight.min.js";
import markdownit from "../vendor/markdown-it/markdown-it.esm.min.mjs";
import { copyButton } from "./copy.js";
import { drawDiagrams } from "./diagrams.js";
import { mathPlugin, typeset } from "./math.js";
import { visible } from "./visible.js";

const SAFE_URL = /^(https?:|mailto:)/i;
// Colouring is linear, but a block this long, re-coloured each frame while it streams, would
// hold the page: it stays plain.
const HIGHLIGHT_LIMIT = 20_000;
const TASK = /^\[([ xX])\]\s+/;
// How long one frame may spend on blocks that are complete, and how many go to the sanitiser
// at once (each call parses a document of its own).
const FRAME_BUDGET_MS = 6;
// Frames that come seldom (a loaded machine, a slow device) each take more of what piled up:
// a third of the time since the last frame, up to this. A step a frame made a long reply
// finish rendering a minute after it ended there, each frame's layout and paint of the whole
// page costing more than its step.
const SLOW_FRAME_BUDGET_MS = 30;
const BLOCKS_AT_ONCE = 4;
// Text that piled up is parsed this much (to a line's end) a frame: parsing all of it each
// frame made catching up quadratic, and one frame's parse outlast the frame budget.
const PARSE_AT_ONCE = 2_000;

const md = markdownit({
  html: false,
  linkify: false,
  typographer: false,
  highlight(code, lang) {
    if (!lang || !hljs.getLanguage(lang) || code.length > HIGHLIGHT_LIMIT) return "";
    return hljs.highlight(code, { language: lang, ignoreIllegals: true }).value;
  },
});
md.validateLink = (url) => SAFE_URL.test(url) && URL.canParse(url);
md.use(mathPlugin);

// Reply headings sit under the page's own: # is h3, ## h4, the rest h5 and h6.
md.core.ruler.push("rojo_shape", (state) => {
  for (const token of state.tokens) {
    if (token.type === "heading_open" || token.type === "heading_close") {
      token.tag = `h${Math.min(Number(token.tag.slice(1)) + 2, 6)}`;
    } else if ((token.type === "th_open" || token.type === "td_open") && token.attrGet("style")) {
      // A class, not an inline style: alignment survives a policy that forbids styles.
      const align = token.attrGet("style").replace("text-align:", "");
      token.attrs = [["class", `align-${align}`]];
    }
  }
});

const escape = md.utils.escapeHtml;

// An image becomes a link to it: loading it would tell its host who reads the reply.
md.renderer.rules.image = (tokens, index) => {
  const token = tokens[index];
  const alt = token.children.map((child) => child.content).join("");
  const label = alt ? `[image: ${alt}]` : "[image]";
  return `<a class="image-link" href="${escape(token.attrGet("src"))}">${escape(label)}</a>`;
};

md.renderer.rules.fence = (tokens, index, options) => {
  const token = tokens[index];
  const lang = token.info.trim().split(/\s+/)[0];
  const source = token.content.replace(/\n$/, ""); // the line break before the closing fence
  const code = options.highlight(source, lang) || escape(source);
  const label = lang ? ` data-lang="${escape(lang)}"` : "";
  return `<pre><code class="hljs"${label}>${code}</code></pre>\n`;
};

const PURIFY = {
  ALLOWED_TAGS: [
    "a", "blockquote", "br", "code", "del", "div", "em", "h3", "h4", "h5", "h6", "hr", "li",
    "ol", "p", "pre", "s", "span", "strong", "table", "tbody", "td", "th", "thead", "tr", "ul",
  ],
  ALLOWED_ATTR: ["href", "class", "start", "data-lang", "data-tex"],
  ALLOWED_URI_REGEXP: SAFE_URL,
  RETURN_DOM_FRAGMENT: true,
};

/** Tokens → sanitised, finished DOM nodes. */
function build(tokens) {
  const html = md.renderer.render(tokens, md.options, {});
  const fragment = DOMPurify.sanitize(html, PURIFY);
  finish(fragment);
  return fragment;
}

function finish(fragment) {
  for (const a of fragment.querySelectorAll("a")) finishLink(a);
  for (const li of fragment.querySelectorAll("li")) finishTask(li);
  showHidden(fragment);
  for (const code of fragment.querySelectorAll("pre > code")) finishCode(code);
  typeset(fragment);
}

/**
 * A link shows the full URL on hover and, unless its text is the host itself, the host beside
 * it: a reader sees where it goes, and a secret in it, before a click.
 */
function finishLink(a) {
  const href = a.getAttribute("href") ?? "";
  if (!SAFE_URL.test(href) || !URL.canParse(href)) {
    a.replaceWith(...a.childNodes);
    return;
  }
  const target = new URL(href);
  a.href = target.href;
  a.title = target.href;
  a.target = "_blank";
  a.rel = "noopener noreferrer nofollow";
  const where = target.protocol === "mailto:" ? target.pathname : target.host;
  const text = a.textContent.trim().toLowerCase();
  if (text === where.toLowerCase() || text === target.href.toLowerCase()) return; // says it already
  const host = document.createElement("small");
  host.className = "link-host";
  host.append(...visible(`(${where})`));
  a.after(" ", host);
}

/** `- [ ] todo` and `- [x] done` get a checkbox (shown, not editable). */
function finishTask(li) {
  const holder = li.firstElementChild?.tagName === "P" ? li.firstElementChild : li;
  const first = holder.firstChild;
  if (first?.nodeType !== Node.TEXT_NODE) return;
  const match = first.data.match(TASK);
  if (!match) return;
  first.data = first.data.slice(match[0].length);
  const box = document.createElement("input");
  box.type = "checkbox";
  box.disabled = true;
  box.checked = match[1] !== " ";
  box.setAttribute("aria-label", box.checked ? "done" : "not done");
  holder.prepend(box, " ");
  li.classList.add("task");
  li.parentElement.classList.add("task-list");
}

/** Every text node as visible text: in code all hidden characters, in prose those that reorder. */
function showHidden(root) {
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  const texts = [];
  while (walker.nextNode()) texts.push(walker.currentNode);
  for (const text of texts) {
    const prose = !text.parentElement?.closest("code");
    const nodes = visible(text.data, { prose });
    if (nodes.length > 1) text.replaceWith(...nodes);
  }
}

/**
 * A code block gets a head: its language and a copy button. Copy takes the code as shown: a
 * hidden character comes out as its ⟨U+…⟩ escape, never as the character that was hidden.
 */
function finishCode(code) {
  const pre = code.parentElement;
  const block = document.createElement("div");
  block.className = "code-block";
  const head = document.createElement("div");
  head.className = "code-head";
  const lang = document.createElement("span");
  lang.className = "code-lang";
  lang.append(...visible(code.dataset.lang ?? "text"));
  head.append(lang, copyButton(() => code.textContent, "Copy code"));
  pre.replaceWith(block);
  block.append(head, pre);
  if (code.dataset.lang === "mermaid") block.dataset.diagram = "mermaid"; // drawn once complete
}

// The first reply would pay for compiling the parser's and the highlighter's expressions in
// its first frame: they are compiled when the page is idle.
const WARM_UP =
  "# A\n\n| a | b |\n|---|---|\n| `c` | [d](https://e.example) |\n\n- [x] f\n  1. g\n\n> h\n\n" +
  "```python\ndef f(x): return 'y'  # z\n```\n\n```js\nconst a = () => 1;\n```\n\n```sh\nls -l\n```\n";
(window.requestIdleCallback ?? setTimeout)(() => renderMarkdown(WARM_UP, document.createElement("div")));

function normalized(text) {
  return text.includes("\r") ? text.replace(/\r\n?/g, "\n") : text;
}

/** Render Markdown `text` into `container`, replacing its children. */
export function renderMarkdown(text, container) {
  delete container.markdown;
  container.replaceChildren(build(md.parse(normalized(text), {})));
  drawDiagrams(container);
}

/** Where line `line` of `text` starts, or -1 past the last complete line. */
function lineOffset(text, line) {
  let offset = 0;
  for (let i = 0; i < line; i++) {
    offset = text.indexOf("\n", offset) + 1;
    if (offset === 0) return -1;
  }
  return offset;
}

/** The indices of the tokens that open each top-level block. */
function blockStarts(tokens) {
  const starts = [];
  tokens.forEach((token, index) => {
    if (token.level === 0 && token.nesting >= 0) starts.push(index);
  });
  return starts;
}

/** The blocks of `rest` (token indexes) and how many of them are final. */
function finalBlocks(rest) {
  const tokens = md.parse(rest, {});
  const starts = blockStarts(tokens);
  let keep = starts.length - 1; // every block but the last
  // The last block's first line must be complete: "2" may yet become "2. item" of the list above.
  if (keep > 0 && lineOffset(rest, tokens[starts[keep]].map[0] + 1) < 0) keep--;
  return { tokens, starts, keep };
}

/**
 * Render a reply that is still growing into `container`, with the same result as
 * renderMarkdown. Once a new top-level block has begun on a complete line, the blocks before
 * it cannot change: they are rendered once and kept, and only the last block is parsed and
 * rendered again. Re-rendering the whole reply each frame made a long reply stall the page.
 * A frame renders for about FRAME_BUDGET_MS (more when frames come seldom: `since` is the
 * time since the last, in ms), PARSE_AT_ONCE of text a step, then returns false: the caller
 * renders the rest in the next frame (a reply reopened whole, or text that piled up while the
 * page was busy, does not hold the page either).
 */
export function renderGrowingMarkdown(text, container, { since = 0 } = {}) {
  const started = performance.now();
  const budget = Math.min(Math.max(since / 3, FRAME_BUDGET_MS), SLOW_FRAME_BUDGET_MS);
  text = normalized(text);
  let done;
  do done = renderStep(text, container, started, budget);
  while (!done && performance.now() - started < budget);
  return done;
}

/** One step of renderGrowingMarkdown: true once all of `text` is rendered. */
function renderStep(text, container, started, budget) {
  const state = (container.markdown ??= { done: 0, tail: [] });
  let rest = text.slice(state.done);
  // A prefix ending on a line's end is what the reply was while it streamed: its blocks but
  // the last are final all the same. Only a prefix that holds no final block is not enough.
  const cut = rest.indexOf("\n", PARSE_AT_ONCE) + 1;
  let cutShort = cut > 0 && cut < rest.length;
  let { tokens, starts, keep } = finalBlocks(cutShort ? rest.slice(0, cut) : rest);
  if (cutShort && keep < 1) {
    cutShort = false; // one block longer than the cut: parse all of it
    ({ tokens, starts, keep } = finalBlocks(rest));
  } else if (cutShort) rest = rest.slice(0, cut);
  for (const node of state.tail) node.remove();
  state.tail = [];
  let kept = 0;
  while (kept < keep) {
    const end = Math.min(kept + BLOCKS_AT_ONCE, keep);
    const final = build(tokens.slice(starts[kept], starts[end]));
    drawDiagrams(final);
    container.append(final);
    kept = end;
    if (performance.now() - started > budget) break;
  }
  if (kept > 0) state.done += lineOffset(rest, tokens[starts[kept]].map[0]);
  if (kept < keep || cutShort) return false; // the text past the cut is for the next frame
  const fragment = build(tokens.slice(starts[kept] ?? 0));
  state.tail = [...fragment.childNodes];
  container.append(fragment);
  return true;
}

/**
 * The reply is complete. A reference definition (`[x]: https://…`) also serves links above
 * it, which were rendered before it arrived: such a reply is rendered once more, whole.
 */
export function finishGrowingMarkdown(text, container) {
  if (container.markdown && /^ {0,3}\[[^\]]+\]:/m.test(text)) renderMarkdown(text, container);
  else drawDiagrams(container); // the last block is complete too
}
