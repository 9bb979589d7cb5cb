// The conversation log's DOM: bubbles for people and the rojo, dim activity lines for its tool
// calls, errors. It keeps the reader's place at the end; nothing is ever inserted as HTML, and
// hidden characters show as escapes.

import { attachmentChip } from "./attach.js";
import { imageThumbs } from "./image-attach.js";
import { copyButton } from "./copy.js";
import { agreeing, counted } from "./counted.js";
import { finishGrowingMarkdown, renderGrowingMarkdown } from "./markdown.js";
import { stampTime } from "./message-times.js";
import { short, toolLine } from "./render.js";
import { visible } from "./visible.js";

// Rojo's own page where a member connects their account on an MCP server (rojos/mcp/tools.py).
const CONNECT_PATH = /\/connections\/#mcp-[A-Za-z0-9_-]+/;

export class ChatLog {
  constructor(element) {
    this.element = element;
    this.bubble = null; // the reply's bubble while text still goes into it
    this.lines = new Map(); // a tool call's id -> its activity line
    this.following = true; // the reader is at the end of the log (not reading older text)
    element.addEventListener("scroll", () => {
      if (element.clientHeight) this.following = this.atEnd();
    });
  }

  /** Whether the log shows its end: new content then keeps it in view. */
  atEnd() {
    // A hidden log (another tab on a phone) measures nothing: keep what was last seen.
    if (!this.element.clientHeight) return this.following;
    return this.element.scrollHeight - this.element.scrollTop - this.element.clientHeight < 80;
  }

  /** Scroll to the end if the reader was following it (back on the chat tab, say). */
  followEnd() {
    if (this.following) this.element.scrollTop = this.element.scrollHeight;
  }

  append(node) {
    const atBottom = this.atEnd();
    this.element.append(node);
    if (atBottom) this.element.scrollTop = this.element.scrollHeight;
    return node;
  }

  /** The reply's bubble is complete: later text starts a new one. */
  closeBubble() {
    if (this.bubble && !this.bubble.renderPending) finishGrowingMarkdown(this.bubble.text, this.bubble.body);
    this.bubble?.removeAttribute("aria-busy");
    this.bubble = null;
  }

  /** The user's message, with a chip for each file attached to it (`attachments`: paths),
   * a thumbnail for each image (`images`: where each is served) and a chip for each PDF
   * (`pdfs`: chips made by pdf-chip.js). */
  addUser(text, attachments = [], images = [], pdfs = []) {
    this.closeBubble();
    const bubble = document.createElement("div");
    bubble.className = "bubble user";
    bubble.text = text; // as typed: the conversation's title is made from it
    bubble.append(...visible(text, { prose: true }));
    if (attachments.length || pdfs.length) {
      const chips = document.createElement("div");
      chips.className = "attachment-chips";
      chips.append(...attachments.map((path) => attachmentChip(path)), ...pdfs);
      bubble.append(chips);
    }
    if (images.length) bubble.append(imageThumbs(images));
    bubble.append(copyButton(() => bubble.text, "Copy text"));
    stampTime(bubble);
    return this.append(bubble);
  }

  /** More of the reply; `busy` while it streams, so screen readers wait for the whole of it. */
  addAssistantText(text, { busy = false } = {}) {
    if (!this.bubble) {
      const bubble = document.createElement("div");
      bubble.className = "bubble assistant";
      bubble.text = "";
      if (busy) bubble.setAttribute("aria-busy", "true");
      bubble.body = document.createElement("div");
      bubble.body.className = "message-body";
      bubble.append(bubble.body, copyButton(() => bubble.text, "Copy text"));
      stampTime(bubble);
      this.bubble = this.append(bubble);
      this.lastReply = bubble; // where the turn's tokens and cost are shown
    }
    this.bubble.text += text; // the attribute is written once a frame, not for every chunk
    this.scheduleRender(this.bubble);
  }

  scheduleRender(bubble) {
    if (bubble.renderPending) return;
    bubble.renderPending = true;
    requestAnimationFrame((now) => {
      bubble.renderPending = false;
      const atBottom = this.atEnd();
      bubble.dataset.text = bubble.text;
      const since = now - (bubble.frame ?? now);
      bubble.frame = now;
      if (!renderGrowingMarkdown(bubble.text, bubble.body, { since })) this.scheduleRender(bubble); // more to do
      else if (bubble !== this.bubble) finishGrowingMarkdown(bubble.text, bubble.body); // closed meanwhile
      if (atBottom) this.element.scrollTop = this.element.scrollHeight;
    });
  }

  addToolCall({ id, name, args }) {
    this.closeBubble();
    const line = toolLine({ id, name, args });
    this.lines.set(id, line);
    return this.append(line);
  }

  /** The call's outcome on its line (a line of its own for a call not shown); returns the line. */
  addToolResult({ id, name, result, ok, mcp }) {
    const line = this.lines.get(id) ?? this.addToolCall({ id, name, args: {} });
    line.classList.remove("pending");
    line.classList.add(ok ? "ok" : "error");
    line.approval?.remove();
    const message = result && typeof result === "object" && "error" in result ? result.error : result;
    const outcome = line.querySelector(".outcome");
    outcome.classList.remove("progress"); // the last report gives way to the outcome
    line.querySelector(".mcp-connect")?.remove();
    outcome.replaceChildren(...visible(ok ? " → ok" : ` → error: ${short(String(message), 200)}`));
    if (mcp) {
      // An MCP server's tool: what it changed is not in the undo ledger.
      const note = document.createElement("span");
      note.className = "mcp-note";
      note.append(...visible(` · MCP server ${mcp.server}; not undoable here`));
      outcome.append(note);
      // A server acting as each member, which the turn's member has not connected: where to.
      const connect = ok ? null : String(message).match(CONNECT_PATH);
      if (connect) {
        const link = document.createElement("a");
        link.className = "mcp-connect";
        link.href = connect[0];
        link.textContent = "Connect your account";
        outcome.after(link); // beside the outcome, which a long error cuts short
      }
    }
    return line;
  }

  /** Show `box` under the line of call `id` (or last in the log); its result removes it. */
  addUnderCall(id, box) {
    const line = this.lines.get(id);
    (line ?? this.element.lastElementChild).after(box);
    if (line) line.approval = box;
    box.scrollIntoView({ block: "nearest" });
  }

  /** The oldest turns were summarised to fit the window: a collapsed line that opens to it. */
  addSummary({ text, messages }) {
    this.closeBubble();
    const box = document.createElement("details");
    box.className = "summary-line";
    const head = document.createElement("summary");
    head.textContent = "Earlier conversation summarised";
    head.title =
      `${counted(messages, "earlier message")} ${agreeing(messages, "is", "are")} sent as this summary; ` +
      `${agreeing(messages, "it stays", "they stay")} stored in full`;
    const body = document.createElement("div");
    body.className = "summary-text";
    body.textContent = text;
    box.append(head, body);
    return this.append(box);
  }

  /** Something the turn goes on after (a failure after the reply finished): after the reply,
   * which stays whole. */
  addNotice(message, code) {
    this.closeBubble();
    const box = document.createElement("div");
    box.className = `chat-notice ${code}`;
    box.setAttribute("role", "status");
    box.append(...visible(message));
    return this.append(box);
  }

  addError(message, code = "error") {
    // The reply's bubble stays open: a refused undo or approval mid-reply must not split it.
    const box = document.createElement("div");
    box.className = `chat-error ${code}`;
    box.setAttribute("role", "alert");
    box.append(...visible(message));
    return this.append(box);
  }

  clear() {
    this.element.replaceChildren();
    this.lines.clear();
    this.closeBubble();
  }
}
