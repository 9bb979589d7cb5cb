// The chat panel: bubbles for people and the rojo, dim activity lines for its tool calls.
// Live events and stored history go through the same methods, so a reopened conversation
// looks exactly as it did while it ran. Nothing is ever inserted as HTML.

import { ApiError, getJson, request } from "./api.js";
import { renderGrowingMarkdown } from "./markdown.js";
import { approvalBox, parseMaybe, short, toolLine } from "./render.js";
import { readEvents } from "./sse.js";

export class ChatPanel extends EventTarget {
  constructor(element, { projectId, conversationId, rojoId, writingTools, canWrite }) {
    super();
    this.writingTools = new Set(writingTools);
    this.canWrite = canWrite;
    this.turnMessage = null;
    this.turnChanges = [];
    this.element = element;
    this.projectId = projectId;
    this.conversationId = conversationId;
    this.rojoId = rojoId;
    this.log = element.querySelector(".messages");
    this.form = element.querySelector(".composer");
    this.input = element.querySelector("textarea");
    this.sendButton = element.querySelector(".send");
    this.stopButton = element.querySelector(".stop");
    this.busyNote = element.querySelector(".busy");
    this.bubble = null;
    this.lines = new Map();
    this.lastEventId = 0;
    this.busy = false;
    this.following = true; // the reader is at the end of the log (not reading older text)
    this.log.addEventListener("scroll", () => {
      if (this.log.clientHeight) this.following = this.atEnd();
    });
    this.form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.send();
    });
    this.input.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        this.send();
      }
    });
    this.stopButton.addEventListener("click", () => this.stop());
  }

  // Rendering

  /** Whether the log shows its end: new content then keeps it in view. */
  atEnd() {
    // A hidden log (another tab on a phone) measures nothing: keep what was last seen.
    if (!this.log.clientHeight) return this.following;
    return this.log.scrollHeight - this.log.scrollTop - this.log.clientHeight < 80;
  }

  /** Scroll to the end if the reader was following it (back on the chat tab, say). */
  followEnd() {
    if (this.following) this.log.scrollTop = this.log.scrollHeight;
  }

  append(node) {
    const atBottom = this.atEnd();
    this.log.append(node);
    if (atBottom) this.log.scrollTop = this.log.scrollHeight;
    return node;
  }

  /** The reply's bubble is complete: later text starts a new one. */
  closeBubble() {
    this.bubble?.removeAttribute("aria-busy");
    this.bubble = null;
  }

  addUser(text) {
    this.closeBubble();
    const bubble = document.createElement("div");
    bubble.className = "bubble user";
    bubble.textContent = text;
    return this.append(bubble);
  }

  addAssistantText(text) {
    if (!this.bubble) {
      const bubble = document.createElement("div");
      bubble.className = "bubble assistant";
      bubble.text = "";
      // Re-rendered as it streams: screen readers wait for the whole reply, not each frame.
      if (this.busy) bubble.setAttribute("aria-busy", "true");
      this.bubble = this.append(bubble);
    }
    this.bubble.text += text; // the attribute is written once a frame, not for every chunk
    this.scheduleRender(this.bubble);
  }

  scheduleRender(bubble) {
    if (bubble.renderPending) return;
    bubble.renderPending = true;
    requestAnimationFrame(() => {
      bubble.renderPending = false;
      const atBottom = this.atEnd();
      bubble.dataset.text = bubble.text;
      renderGrowingMarkdown(bubble.text, bubble);
      if (atBottom) this.log.scrollTop = this.log.scrollHeight;
    });
  }

  addToolCall({ id, name, args }) {
    this.closeBubble();
    const line = toolLine({ id, name, args });
    this.lines.set(id, line);
    return this.append(line);
  }

  addToolResult({ id, name, result, ok, change, undone = false }) {
    const line = this.lines.get(id) ?? this.addToolCall({ id, name, args: {} });
    line.classList.remove("pending");
    line.classList.add(ok ? "ok" : "error");
    line.approval?.remove();
    const outcome = line.querySelector(".outcome");
    const message = result && typeof result === "object" && "error" in result ? result.error : result;
    outcome.textContent = ok ? " → ok" : ` → error: ${short(String(message), 200)}`;
    if (change) {
      line.dataset.change = String(change);
      this.turnChanges.push(change);
      if (undone) this.markUndone(change);
      else if (this.canWrite) this.addUndoButton(line, change);
    }
    if (ok && this.writingTools.has(name)) this.dispatchEvent(new Event("files-changed"));
  }

  addUndoButton(line, change) {
    const button = document.createElement("button");
    button.type = "button";
    button.className = "undo";
    button.textContent = "Undo";
    button.title = "Put the files back as they were before this call";
    button.setAttribute("aria-label", `Undo ${line.querySelector(".call").textContent}`);
    button.addEventListener("click", () => this.undo(`/api/changes/${change}/undo`, {}, button));
    line.after(button);
    line.undoButton = button;
  }

  markUndone(change) {
    const line = this.log.querySelector(`.tool-line[data-change="${change}"]`);
    if (!line) return;
    line.classList.add("undone");
    line.undoButton?.remove();
    const outcome = line.querySelector(".outcome");
    if (!outcome.textContent.endsWith("(undone)")) outcome.textContent += " (undone)";
    // A turn whose changes were all undone one by one has nothing left to undo.
    for (const button of this.log.querySelectorAll(".undo-turn")) {
      if (button.changes.every((id) => this.log.querySelector(`.tool-line.undone[data-change="${id}"]`))) {
        button.remove();
      }
    }
  }

  /** Undo through `path`; the button stays disabled while it runs. True when it worked. */
  async undo(path, json, button) {
    button.disabled = true;
    try {
      const response = await request(path, { method: "POST", json });
      const { undone } = await response.json();
      for (const change of undone) this.markUndone(change);
      this.dispatchEvent(new Event("files-changed"));
      return true;
    } catch (error) {
      button.disabled = false;
      this.addError(error instanceof ApiError ? error.message : "The undo failed.");
      return false;
    }
  }

  /** After a turn that changed files: one button to undo all of it. */
  addUndoTurn(userMessageId, changes) {
    if (!this.canWrite || !userMessageId || !changes.length) return;
    const button = document.createElement("button");
    button.type = "button";
    button.className = "undo undo-turn";
    button.textContent = "Undo this turn";
    button.changes = changes;
    button.addEventListener("click", async () => {
      const path = `/api/conversations/${this.conversationId}/undo-turn`;
      if (await this.undo(path, { message: userMessageId }, button)) button.remove();
    });
    this.append(button);
  }

  addApproval({ id, name, preview }) {
    const line = this.lines.get(id);
    const box = approvalBox({ name, preview });
    if (this.canWrite) {
      const actions = document.createElement("div");
      actions.className = "approval-actions";
      for (const [label, approve] of [["Approve", true], ["Deny", false]]) {
        const button = document.createElement("button");
        button.type = "button";
        button.textContent = label;
        button.className = approve ? "primary approve" : "deny";
        button.addEventListener("click", async () => {
          for (const b of actions.querySelectorAll("button")) b.disabled = true;
          try {
            await request(`/api/conversations/${this.conversationId}/approve`, {
              method: "POST",
              json: { call: id, approve },
            });
          } catch (error) {
            for (const b of actions.querySelectorAll("button")) b.disabled = false;
            this.addError(error instanceof ApiError ? error.message : "The decision was not sent.");
          }
        });
        actions.append(button);
      }
      box.append(actions);
    } else {
      const note = document.createElement("p");
      note.className = "approval-wait";
      note.textContent = "Waiting for an editor of this project to approve or deny.";
      box.append(note);
    }
    (line ?? this.log.lastElementChild).after(box);
    if (line) line.approval = box;
    box.scrollIntoView({ block: "nearest" });
  }

  addError(message, code = "error") {
    // The reply's bubble stays open: a refused undo or approval mid-reply must not split it.
    const box = document.createElement("div");
    box.className = `chat-error ${code}`;
    box.setAttribute("role", "alert");
    box.textContent = message;
    return this.append(box);
  }

  clear() {
    this.log.replaceChildren();
    this.lines.clear();
    this.closeBubble();
  }

  /** Replay stored OpenAI-format messages through the same methods as live events. */
  renderHistory(messages, { changes = [], turns = [] } = {}) {
    const changeOf = new Map(changes.map((c) => [c.tool_call_id, c]));
    const turnOf = new Map(turns.map((t) => [t.user_message_id, t]));
    let turn = null;
    const endTurn = () => {
      if (!turn) return;
      const record = turnOf.get(turn);
      if (record?.error) this.addError(record.error, record.error_code || "error");
      const open = changes.filter((c) => this.turnChanges.includes(c.id) && !c.undone);
      this.addUndoTurn(turn, open.map((c) => c.id));
      this.turnChanges = [];
    };
    for (const message of messages) {
      if (message.role === "user") {
        endTurn();
        turn = message.id;
        this.addUser(message.content ?? "");
      } else if (message.role === "assistant") {
        if (message.content) this.addAssistantText(message.content);
        for (const call of message.tool_calls ?? []) {
          const args = call.function.arguments ? parseMaybe(call.function.arguments) : {};
          this.addToolCall({ id: call.id, name: call.function.name, args });
        }
      } else if (message.role === "tool") {
        const change = changeOf.get(message.tool_call_id);
        this.addToolResult({
          id: message.tool_call_id,
          name: message.name,
          result: parseMaybe(message.content ?? ""),
          ok: !message.is_error,
          change: change?.id,
          undone: Boolean(change?.undone),
        });
      }
    }
    endTurn();
    this.closeBubble();
  }

  // Turns

  setBusy(busy) {
    this.busy = busy;
    if (!busy) this.stopWanted = false;
    this.stopButton.disabled = false;
    // Read-only, not disabled, while a reply runs: a disabled box drops the keyboard focus.
    this.input.readOnly = busy;
    this.sendButton.disabled = busy;
    this.stopButton.hidden = !busy;
    this.busyNote.hidden = !busy;
    if (!busy) this.closeBubble();
    // Back to the box at the end, unless the user went on elsewhere (the files, say).
    const focus = document.activeElement;
    if (!busy && (!focus || focus === document.body || this.element.contains(focus))) {
      this.input.focus();
    }
  }

  handle(event) {
    if (event.id) this.lastEventId = event.id;
    const data = event.data;
    switch (event.type) {
      case "START":
        this.turnStarted = true;
        this.turnMessage = data.message;
        this.turnChanges = [];
        this.joinConversation(data.conversation);
        if (this.stopWanted) this.stop();
        break;
      case "CHAT":
        this.addAssistantText(data.text);
        break;
      case "TOOL_CALL":
        this.addToolCall(data);
        break;
      case "APPROVAL_REQUIRED":
        this.addApproval(data);
        break;
      case "TOOL_RESULT":
        this.addToolResult(data);
        break;
      case "ERROR":
        this.addError(data.message, data.code);
        break;
      case "DONE":
        this.closeBubble();
        this.addUndoTurn(this.turnMessage, this.turnChanges);
        this.turnChanges = [];
        break;
    }
  }

  async consume(events) {
    let done = false;
    try {
      for await (const event of events) {
        this.handle(event);
        if (event.type === "DONE") done = true;
      }
    } catch (error) {
      if (!done && this.conversationId) return this.reattach();
      this.addError("The connection to the server was lost.");
    }
    if (!done && this.conversationId) return this.reattach();
    this.setBusy(false);
    this.dispatchEvent(new Event("turn-finished"));
  }

  async send() {
    const text = this.input.value.trim();
    if (!text || this.busy) return;
    if (!this.rojoId) {
      this.addError("Pick a rojo first.");
      return;
    }
    this.input.value = "";
    this.turnStarted = false;
    this.setBusy(true);
    const bubble = this.addUser(text);
    this.lastEventId = 0;
    let response;
    try {
      response = await request(`/api/projects/${this.projectId}/chat`, {
        method: "POST",
        json: { rojo: this.rojoId, message: text, conversation: this.conversationId },
        accept: "text/event-stream",
      });
    } catch (error) {
      if (error instanceof ApiError && error.body?.conversation) {
        // Stored, but its reply could not start: the message stays, in the conversation named.
        this.joinConversation(error.body.conversation);
      } else {
        // Not sent (refused, or the server is out of reach): it goes back in the box.
        bubble.remove();
        if (!this.input.value) this.input.value = text;
      }
      this.addError(error instanceof ApiError ? error.message : "The server could not be reached.");
      this.setBusy(false);
      return;
    }
    await this.consume(readEvents(response));
  }

  /** The message just sent is in this conversation (a new one, the first time). */
  joinConversation(id) {
    if (this.conversationId !== id) {
      this.conversationId = id;
      this.dispatchEvent(new CustomEvent("conversation", { detail: id }));
    }
    this.dispatchEvent(new CustomEvent("turn", { detail: id }));
  }

  async reattach() {
    const response = await request(`/api/conversations/${this.conversationId}/stream?after=${this.lastEventId}`, {
      accept: "text/event-stream",
    }).catch(() => null);
    if (!response) {
      this.addError("The connection to the server was lost; reload the page to see the reply.");
      this.setBusy(false);
      return;
    }
    await this.consume(readEvents(response));
  }

  async stop() {
    this.stopButton.disabled = true;
    if (!this.turnStarted) {
      // The reply has no turn to stop yet (a new conversation has no id either): stop it
      // as soon as it starts.
      this.stopWanted = true;
      return;
    }
    this.stopWanted = false;
    try {
      await request(`/api/conversations/${this.conversationId}/stop`, { method: "POST" });
    } catch (error) {
      this.addError(error instanceof ApiError ? error.message : "Could not stop the reply.");
    } finally {
      this.stopButton.disabled = false;
    }
  }

  /** Show a stored conversation; if a turn is running, re-attach and keep streaming it. */
  async open(conversationId) {
    this.conversationId = conversationId;
    this.clear();
    const detail = await getJson(`/api/conversations/${conversationId}`);
    if (!detail.running) {
      this.renderHistory(detail.messages, detail);
      return;
    }
    const response = await request(`/api/conversations/${conversationId}/stream`, {
      accept: "text/event-stream",
    });
    const events = readEvents(response);
    const first = await events.next();
    if (first.done || first.value.type !== "START") {
      // The turn ended in between: the stored history is complete.
      const fresh = await getJson(`/api/conversations/${conversationId}`);
      this.renderHistory(fresh.messages, fresh);
      return;
    }
    const turnMessage = first.value.data.message;
    this.renderHistory(
      detail.messages.filter((m) => m.id < turnMessage),
      detail,
    );
    const own = detail.messages.find((m) => m.id === turnMessage);
    if (own) this.addUser(own.content ?? "");
    this.handle(first.value);
    this.setBusy(true);
    await this.consume(events);
  }
}
