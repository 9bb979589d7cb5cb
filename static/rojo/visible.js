// Characters that hide or reorder text, shown as visible escapes such as ⟨U+202E⟩. Without it
// "invoice\u202Etxt.exe" reads as "invoiceexe.txt", and two different names can look alike.
// The server's template filter (roject/templatetags/visible.py) uses the same two sets.

// In names, paths, arguments, diffs, errors and code: every control character but tab and
// newline, and every format, bidi, zero-width, filler, variation selector and tag character.
const HIDDEN =
  /[\0-\x08\x0B-\x1F\x7F-\x9F\xAD\u034F\u061C\u115F\u1160\u17B4\u17B5\u180B-\u180F\u200B-\u200F\u2028-\u202E\u2060-\u206F\u3164\uFE00-\uFE0F\uFEFF\uFFA0\uFFF9-\uFFFB\u{1BCA0}-\u{1BCA3}\u{1D173}-\u{1D17A}\u{E0000}-\u{E007F}\u{E0100}-\u{E01EF}]/gu;
// In prose (replies, messages, a file's text), where joiners, marks and soft hyphens are
// ordinary writing: what reorders text (bidi embeddings, overrides, isolates), what hides it
// (tag characters) and control characters but tab, newline and carriage return.
const REORDERING = /[\0-\x08\x0B\x0C\x0E-\x1F\x7F-\x9F\u202A-\u202E\u2066-\u206F\u{E0000}-\u{E007F}]/gu;

const NAMES = {
  0x00ad: "soft hyphen",
  0x061c: "Arabic letter mark",
  0x180e: "Mongolian vowel separator",
  0x200b: "zero width space",
  0x200c: "zero width non-joiner",
  0x200d: "zero width joiner",
  0x200e: "left-to-right mark",
  0x200f: "right-to-left mark",
  0x2028: "line separator",
  0x2029: "paragraph separator",
  0x202a: "left-to-right embedding",
  0x202b: "right-to-left embedding",
  0x202c: "pop directional formatting",
  0x202d: "left-to-right override",
  0x202e: "right-to-left override",
  0x2060: "word joiner",
  0x2066: "left-to-right isolate",
  0x2067: "right-to-left isolate",
  0x2068: "first strong isolate",
  0x2069: "pop directional isolate",
  0xfeff: "zero width no-break space",
};

function escape(char) {
  return `⟨U+${char.codePointAt(0).toString(16).toUpperCase().padStart(4, "0")}⟩`;
}

function describe(char) {
  const name = NAMES[char.codePointAt(0)] ?? "an invisible or control character";
  return `${escape(char).slice(1, -1)}, ${name}: shown, not applied`;
}

/**
 * `text` as DOM nodes to append, each hidden character a highlighted `⟨U+XXXX⟩`; `prose`
 * escapes only what reorders or hides text. Never HTML: the rest stays text nodes.
 */
export function visible(text, { prose = false } = {}) {
  const pattern = prose ? REORDERING : HIDDEN;
  text = String(text);
  if (text.search(pattern) < 0) return [document.createTextNode(text)];
  const nodes = [];
  let last = 0;
  for (const match of text.matchAll(pattern)) {
    if (match.index > last) nodes.push(document.createTextNode(text.slice(last, match.index)));
    const mark = document.createElement("span");
    mark.className = "hidden-char";
    mark.title = describe(match[0]);
    mark.textContent = escape(match[0]);
    nodes.push(mark);
    last = match.index + match[0].length;
  }
  if (last < text.length) nodes.push(document.createTextNode(text.slice(last)));
  return nodes;
}

/** The same as a string, for what cannot hold markup: attributes, options, labels. */
export function visibleText(text, { prose = false } = {}) {
  return String(text).replace(prose ? REORDERING : HIDDEN, escape);
}
