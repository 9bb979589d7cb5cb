// Mermaid diagrams in replies: a ```mermaid block, once complete, is drawn by Mermaid (loaded
// with the first diagram; each kind of diagram loads its own part), at its strict security
// level and with labels as SVG text, never HTML; the SVG is sanitised once more before it
// joins the page. The block's source stays one click away ("Source"), and a diagram Mermaid
// cannot parse keeps its source shown with Mermaid's error under it.
//
// Diagrams are drawn one at a time (Mermaid renders through a scratch element of the page's),
// and only from complete blocks: a block still streaming would fail to parse at every frame.

import DOMPurify from "../vendor/dompurify/purify.es.mjs";

let mermaid = null;
let queue = Promise.resolve();
let drawn = 0;

// No links: a node's `click A "https://…"` would be a link the reply's own links are not
// (its host shown, a new tab: markdown.js), opening in the app's tab; its label is kept.
const SVG_ONLY = {
  USE_PROFILES: { svg: true, svgFilters: true },
  FORBID_TAGS: ["a"],
  RETURN_DOM_FRAGMENT: true,
};

async function loaded() {
  if (mermaid) return mermaid;
  mermaid = (await import("../vendor/mermaid/mermaid.esm.min.mjs")).default;
  const dark = document.documentElement.dataset.theme === "dark" ||
    (!document.documentElement.dataset.theme && matchMedia("(prefers-color-scheme: dark)").matches);
  mermaid.initialize({
    startOnLoad: false,
    securityLevel: "strict",
    htmlLabels: false,
    theme: dark ? "dark" : "default",
    maxTextSize: 50_000,
    maxEdges: 500,
    // A diagram that does not parse is told in its block: Mermaid's own error picture would be
    // left at the end of the page, under the app.
    suppressErrorRendering: true,
  });
  return mermaid;
}

/** Draw every complete ```mermaid block under `root` not yet drawn. */
export function drawDiagrams(root) {
  for (const block of root.querySelectorAll(".code-block[data-diagram='mermaid']")) {
    block.dataset.diagram = "drawing";
    queue = queue.then(() => draw(block)).catch(() => {});
  }
}

async function draw(block) {
  const code = block.querySelector("pre > code");
  const source = code.textContent;
  let svg;
  try {
    const api = await loaded();
    ({ svg } = await api.render(`rojo-diagram-${++drawn}`, source));
  } catch (error) {
    block.dataset.diagram = "failed";
    const note = document.createElement("p");
    note.className = "diagram-error";
    note.setAttribute("role", "note");
    note.textContent = `This diagram could not be drawn: ${error?.message ?? error}`;
    block.append(note);
    return;
  }
  const figure = document.createElement("div");
  figure.className = "diagram";
  figure.setAttribute("role", "img");
  figure.setAttribute("aria-label", "Diagram (its source is one click away)");
  figure.append(DOMPurify.sanitize(svg, SVG_ONLY));
  const pre = code.parentElement;
  pre.hidden = true;
  pre.before(figure);
  block.dataset.diagram = "drawn";
  const toggle = document.createElement("button");
  toggle.type = "button";
  toggle.className = "diagram-toggle";
  toggle.textContent = "Source";
  toggle.setAttribute("aria-pressed", "false");
  toggle.addEventListener("click", () => {
    const showSource = pre.hidden;
    pre.hidden = !showSource;
    figure.hidden = showSource;
    toggle.textContent = showSource ? "Diagram" : "Source";
    toggle.setAttribute("aria-pressed", String(showSource));
  });
  block.querySelector(".code-head")?.append(toggle);
}
