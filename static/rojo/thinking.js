// The model's thinking: a collapsed "Thinking… 12 s" line whose text is one click away. It
// grows while the model thinks (the seconds, and the text inside), and folds as "Thought for
// 12 s" when the answer (text or a tool call) starts. A stored reply's thinking comes whole,
// with how long it took. The event that begins a live thinking says how long it has lasted
// (`elapsed`, by the server's clock), so a page that joins mid-thought (a reload, another tab)
// counts from its real start. A thinking the server takes back (`retracted`: it was the
// answer, which comes next as the reply's text) leaves the log. The model's text goes in as
// text nodes only, hidden characters shown.

import { visible } from "./visible.js";

function seconds(value) {
  return Math.max(0, Math.round(value));
}

export class Thinking {
  constructor(log) {
    this.log = log;
    this.box = null; // the line still thinking
    this.latest = null; // the last live line, folded or not: what a retraction takes back
    this.timer = null;
  }

  /** A REASONING event: more of the live thinking, or a stored reply's whole (`whole`), or
   * the live thinking taken back (`retracted`). */
  add({ text, whole = false, seconds: took = null, elapsed = 0, retracted = false }) {
    if (retracted) {
      this.fold();
      this.latest?.remove();
      this.latest = null;
      return;
    }
    if (whole) {
      this.fold();
      const box = this.line(text);
      box.label.textContent = took == null ? "Thought" : `Thought for ${seconds(Math.max(took, 1))} s`;
      return;
    }
    if (!this.box) {
      this.box = this.latest = this.line("");
      this.box.began = performance.now() - elapsed * 1000;
      this.box.dataset.live = "";
      this.tick();
      this.timer = setInterval(() => this.tick(), 1000);
    }
    const atEnd = this.log.atEnd();
    const nodes = visible(text, { prose: true });
    const last = this.box.body.lastChild;
    if (nodes.length === 1 && last?.nodeType === Node.TEXT_NODE) last.appendData(text);
    else this.box.body.append(...nodes);
    this.box.text += text;
    if (atEnd) this.log.element.scrollTop = this.log.element.scrollHeight;
  }

  /** The answer starts (or the turn ends): the line stops counting and folds. */
  fold() {
    const box = this.box;
    if (!box) return;
    clearInterval(this.timer);
    this.timer = null;
    this.box = null;
    delete box.dataset.live;
    box.open = false;
    box.label.textContent = `Thought for ${seconds(Math.max(this.elapsed(box), 1))} s`;
  }

  elapsed(box) {
    return (performance.now() - box.began) / 1000;
  }

  tick() {
    const box = this.box;
    if (!box) return;
    if (!box.isConnected) {
      this.box = null; // the log was cleared: another conversation opened
      clearInterval(this.timer);
      return;
    }
    box.label.textContent = `Thinking… ${seconds(this.elapsed(box))} s`;
  }

  /** A collapsed line in the log that opens to `text`. */
  line(text) {
    this.log.closeBubble();
    const box = document.createElement("details");
    box.className = "thinking";
    const head = document.createElement("summary");
    box.label = document.createElement("span");
    box.label.className = "thinking-label";
    head.append(box.label);
    box.body = document.createElement("div");
    box.body.className = "thinking-text";
    box.body.append(...visible(text, { prose: true }));
    box.text = text;
    box.append(head, box.body);
    return this.log.append(box);
  }
}
