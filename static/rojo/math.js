// Math in replies: `$…$`, `\(…\)` inline and `$$…$$`, `\[…\]` on lines of their own are parsed
// by markdown-it rules of ours into elements holding the TeX as text (`data-tex`), typeset by
// KaTeX once its module is loaded (the first reply with math loads it; until then, and where
// KaTeX cannot parse it, the source shows as it was written). KaTeX runs with `trust` off (no
// \href, \url, \includegraphics or HTML of the model's) and bounded sizes and macro expansion,
// and builds the DOM itself: nothing from the model is ever parsed as HTML.
//
// A dollar opens math only before a non-space and closes only after one, not followed by a
// digit (Pandoc's rule): "costs $5 and $10" stays text.

const KATEX_OPTIONS = {
  throwOnError: false,
  trust: false,
  strict: "ignore",
  maxSize: 20,
  maxExpand: 200,
  output: "htmlAndMathml",
};

let katex = null;
let loading = null;

function load() {
  loading ??= (async () => {
    const sheet = document.createElement("link");
    sheet.rel = "stylesheet";
    sheet.href = new URL("../vendor/katex/katex.min.css", import.meta.url).href;
    document.head.append(sheet);
    katex = (await import("../vendor/katex/katex.min.mjs")).default;
    typeset(document);
  })();
  return loading;
}

/** Typeset every math element under `root` not yet typeset; loads KaTeX on first need. */
export function typeset(root) {
  const pending = root.querySelectorAll(".math:not([data-typeset])");
  if (pending.length === 0) return;
  if (!katex) {
    load().catch(() => {}); // the source stays shown: still readable
    return;
  }
  for (const element of pending) {
    const tex = element.dataset.tex;
    element.dataset.typeset = "";
    element.title = tex;
    try {
      katex.render(tex, element, { ...KATEX_OPTIONS, displayMode: element.tagName === "DIV" });
    } catch {
      element.textContent = tex; // throwOnError is off; anything else still shows the source
    }
  }
}

function closingDollar(src, start, max) {
  for (let at = start; at < max; at++) {
    const char = src.charCodeAt(at);
    if (char === 0x5c /* \ */) {
      at++;
      continue;
    }
    if (char !== 0x24 /* $ */) continue;
    const before = src.charCodeAt(at - 1);
    const after = src.charCodeAt(at + 1);
    if (before === 0x20 || before === 0x09 || (after >= 0x30 && after <= 0x39)) continue;
    return at;
  }
  return -1;
}

function mathInline(state, silent) {
  const { src, pos, posMax } = state;
  let open, close, length;
  if (src.startsWith("\\(", pos)) {
    close = src.indexOf("\\)", pos + 2);
    if (close < 0 || close >= posMax) return false;
    open = pos + 2;
    length = 2;
  } else if (src.charCodeAt(pos) === 0x24) {
    const double = src.charCodeAt(pos + 1) === 0x24;
    open = pos + (double ? 2 : 1);
    const first = src.charCodeAt(open);
    if (open >= posMax || first === 0x20 || first === 0x09 || first === 0x0a) return false;
    if (double) {
      close = src.indexOf("$$", open);
      if (close < 0 || close >= posMax) return false;
    } else {
      close = closingDollar(src, open, posMax);
      if (close < 0) return false;
    }
    length = double ? 2 : 1;
  } else {
    return false;
  }
  if (close === open) return false;
  if (!silent) {
    const token = state.push("math_inline", "span", 0);
    token.content = src.slice(open, close);
    token.markup = src.slice(pos, pos + length);
  }
  state.pos = close + length;
  return true;
}

const BLOCK_DELIMITERS = [
  ["$$", "$$"],
  ["\\[", "\\]"],
];

function mathBlock(state, startLine, endLine, silent) {
  const start = state.bMarks[startLine] + state.tShift[startLine];
  const max = state.eMarks[startLine];
  if (state.sCount[startLine] - state.blkIndent >= 4) return false; // an indented code block
  const line = state.src.slice(start, max);
  const pair = BLOCK_DELIMITERS.find(([open]) => line.startsWith(open));
  if (!pair) return false;
  const [open, close] = pair;
  let body = line.slice(open.length);
  let next = startLine;
  let found = body.trimEnd().endsWith(close) && body.trim().length >= close.length;
  if (found) {
    body = body.trimEnd().slice(0, -close.length);
  } else {
    const lines = [body];
    while (++next < endLine) {
      const text = state.src.slice(state.bMarks[next] + state.tShift[next], state.eMarks[next]);
      if (text.trimEnd().endsWith(close)) {
        lines.push(text.trimEnd().slice(0, -close.length));
        found = true;
        break;
      }
      lines.push(text);
    }
    body = lines.join("\n");
  }
  if (!found) return false; // unclosed (still streaming, or not math): the text as written
  if (silent) return true;
  state.line = next + 1;
  const token = state.push("math_block", "div", 0);
  token.block = true;
  token.content = body.trim();
  token.markup = open;
  token.map = [startLine, state.line];
  return true;
}

/** The markdown-it plugin: the rules above and how their tokens render (TeX as text). */
export function mathPlugin(md) {
  const escape = md.utils.escapeHtml;
  md.inline.ruler.before("escape", "math_inline", mathInline);
  md.block.ruler.before("fence", "math_block", mathBlock, {
    alt: ["paragraph", "reference", "blockquote", "list"],
  });
  md.renderer.rules.math_inline = (tokens, index) => {
    const tex = escape(tokens[index].content);
    return `<span class="math" data-tex="${tex}">${escape(tokens[index].markup)}${tex}${escape(closer(tokens[index].markup))}</span>`;
  };
  md.renderer.rules.math_block = (tokens, index) => {
    const { content, markup } = tokens[index];
    const tex = escape(content);
    return `<div class="math" data-tex="${tex}">${escape(markup)}${tex}${escape(closer(markup))}</div>\n`;
  };
}

function closer(markup) {
  return { "\\(": "\\)", "\\[": "\\]" }[markup] ?? markup;
}
