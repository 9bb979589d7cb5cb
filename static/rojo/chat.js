// The chat panel: sends a message, streams its turn, stops it, re-attaches to it. Live events
// and stored history go through the same handler, from events the server sends, so a reopened
// conversation looks exactly as it did while it ran.

import { ApiError, getJson, request } from "./api.js";
import { Activity } from "./activity.js";
import { approvalPrompt } from "./approvals.js";
import { Attachments } from "./attach.js";
import { ImageAttachments, imageUrl } from "./image-attach.js";
import { pdfChip } from "./pdf-chip.js";
import { ChatLog } from "./chat-log.js";
import { TurnPlan } from "./plan.js";
import { questionAnswered, questionPlace, questionPrompt } from "./questions.js";
import { showTimesOnHover, stampTime, turnTimes } from "./message-times.js";
import { Reconnector } from "./reconnect.js";
import { Resender } from "./resend.js";
import { sentConversation, sentKeyForget, sentKeyMake } from "./sent-keys.js";
import { readEvents } from "./sse.js";
import { Thinking } from "./thinking.js";
import { UndoButtons } from "./undo.js";
import { turnUsageShow } from "./usage.js";

/** The stored events before the turn that `message` started (that turn still runs). */
function eventsBefore(events, message) {
  const index = events.findIndex((event) => event.type === "START" && event.data.message >= message);
  return index < 0 ? events : events.slice(0, index);
}

export class ChatPanel extends EventTarget {
  constructor(element, { projectId, conversationId, rojoId, writingTools, canWrite, isOwner, username }) {
    super();
    this.writingTools = new Set(writingTools);
    this.canWrite = canWrite;
    this.isOwner = isOwner;
    this.username = username;
    this.turnMessage = null;
    this.turnChanges = [];
    this.element = element;
    this.projectId = projectId;
    this.conversationId = conversationId;
    this.rojoId = rojoId;
    this.log = new ChatLog(element.querySelector(".messages"));
    showTimesOnHover(this.log.element);
    this.activity = new Activity(this.log, { conversationId: () => this.conversationId });
    this.thinking = new Thinking(this.log);
    this.plan = new TurnPlan(this.log);
    this.undo = new UndoButtons(this.log, {
      canWrite,
      conversationId: () => this.conversationId,
      onUndone: () => this.dispatchEvent(new Event("files-changed")),
    });
    this.form = element.querySelector(".composer");
    this.input = element.querySelector("textarea");
    this.attach = new Attachments(element.querySelector("form.composer"), this.input, projectId);
    this.images = new ImageAttachments(this.form, this.input, projectId, (m) => this.log.addError(m));
    this.sendButton = element.querySelector(".send");
    this.stopButton = element.querySelector(".stop");
    this.busyNote = element.querySelector(".busy");
    this.reconnector = new Reconnector(this.busyNote);
    this.resender = new Resender(this.log);
    this.history = null; // while stored turns are replayed: what their events do not carry
    this.lastEventId = 0;
    this.busy = false;
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

  /** Scroll to the end if the reader was following it (back on the chat tab, say). */
  followEnd() {
    this.log.followEnd();
  }

  addError(message, code = "error") {
    return this.log.addError(message, code);
  }

  setBusy(busy) {
    this.busy = busy;
    if (!busy) this.stopWanted = false;
    this.stopButton.disabled = false;
    // The box stays writable while a reply runs, so the next message can be typed meanwhile;
    // only sending waits (Send disabled, Enter keeps the text) until the reply ends.
    this.sendButton.disabled = busy;
    this.stopButton.hidden = !busy;
    this.busyNote.hidden = !busy;
    if (!busy) this.log.closeBubble();
    // Back to the box at the end, unless the user went on elsewhere (the files, say).
    const focus = document.activeElement;
    if (!busy && (!focus || focus === document.body || this.element.contains(focus))) {
      this.input.focus();
    }
    this.dispatchEvent(new CustomEvent("busy", { detail: busy }));
  }

  /** One event of a turn, live or stored (then `this.history` is set). */
  handle(event) {
    if (event.id) this.lastEventId = event.id;
    const data = event.data;
    if (event.type !== "REASONING") this.thinking.fold(); // the answer (or the end) came
    switch (event.type) {
      case "START":
        this.turnMessage = data.message;
        this.turnChanges = [];
        this.log.lastReply = null;
        if (this.history) {
          const times = this.history.times.get(data.message);
          const asked = this.history.asked.get(data.message) ?? "";
          const bubble = this.addUser(asked, this.history.byId.get(data.message));
          bubble.dataset.message = data.message;
          if (times) stampTime(bubble, times.asked);
          this.history.replied = times?.replied;
          break;
        }
        if (this.sentBubble) this.sentBubble.dataset.message = data.message;
        this.turnStarted = true;
        this.joinConversation(data.conversation);
        if (this.stopWanted) this.stop();
        break;
      case "CHAT":
        this.log.addAssistantText(data.text, { busy: this.busy });
        if (this.history?.replied) stampTime(this.log.bubble, this.history.replied);
        break;
      case "REASONING":
        this.thinking.add(data);
        break;
      case "TOOL_CALL_DELTA":
        this.activity.delta(data);
        break;
      case "TOOL_CALL":
        this.activity.call(data);
        break;
      case "TOOL_PROGRESS":
        this.activity.progress(data);
        break;
      case "APPROVAL_REQUIRED":
        this.log.addUnderCall(
          data.id,
          approvalPrompt(data, {
            canWrite: this.canWrite,
            isOwner: this.isOwner,
            conversationId: this.conversationId,
            onError: (message) => this.log.addError(message),
          }),
        );
        if (!this.history) this.approvalWaiting(true);
        break;
      case "QUESTION": {
        const options = { conversationId: this.conversationId, live: !this.history, username: this.username };
        options.onError = (message) => this.log.addError(message);
        questionPlace(this.log, questionPrompt(data, options), data.call);
        break;
      }
      case "ANSWERED": {
        const box = this.log.element.querySelector(`.question[data-question="${CSS.escape(data.id)}"]`);
        if (box) questionAnswered(box, data);
        break;
      }
      case "TOOL_RESULT":
        this.addToolResult(data);
        break;
      case "SUMMARY":
        this.log.addSummary(data);
        break;
      case "NOTICE":
        this.log.addNotice(data.message, data.code);
        break;
      case "ERROR":
        if (!this.history) this.turnError = data.code ?? "error"; // the queue waits after one
        this.activity.endForming();
        this.log.addError(data.message, data.code);
        break;
      case "DONE":
        this.activity.endForming();
        if (!this.history) this.approvalWaiting(false);
        this.log.closeBubble();
        this.undo.offerTurn(this.turnMessage, this.turnChanges);
        this.turnChanges = [];
        this.usagePending = turnUsageShow(this, this.turnMessage);
        break;
    }
    this.plan.handle(event, { live: !this.history });
  }

  /** Tell the page whether this conversation's reply waits for an approval (its badge). */
  approvalWaiting(waiting) {
    const waitingNow = waiting || Boolean(this.log.element.querySelector(".approval"));
    const detail = { conversation: this.conversationId, waiting: waitingNow };
    this.dispatchEvent(new CustomEvent("approval", { detail }));
  }

  addToolResult(data) {
    const line = this.log.addToolResult(data);
    this.activity.result(line, data);
    if (!this.history && line.approval) this.approvalWaiting(false); // its question is gone
    if (data.change) {
      const undone = Boolean(this.history?.undone.has(data.change));
      if (!undone) this.turnChanges.push(data.change);
      this.undo.track(line, data.change, { undone });
    }
    // Stored writes are in the file list already: only live ones refresh it. An MCP
    // server's tool may have changed files too.
    if (data.ok && !this.history && (this.writingTools.has(data.name) || data.mcp)) {
      this.dispatchEvent(new Event("files-changed"));
    }
  }

  /** Show stored turns through `handle`, without a live turn's side effects: no
   * conversation or turn events, no file refreshes, no focus changes. */
  replay(events, { messages, changes, usage }) {
    this.history = {
      asked: new Map(messages.map((m) => [m.id, m.content ?? ""])),
      byId: new Map(messages.map((m) => [m.id, m])),
      undone: new Set(changes.filter((c) => c.undone).map((c) => c.id)),
      times: turnTimes(messages),
      usage,
    };
    try {
      for (const event of events) {
        try {
          this.handle(event);
        } catch (error) {
          // One event the page cannot show (a foreign server's odd question) hides none after it.
          console.error("an event of this conversation could not be shown", event, error);
        }
      }
    } finally {
      this.history = null;
      this.log.closeBubble();
    }
  }

  async consume(events) {
    let done = false;
    let retry = 0;
    try {
      for await (const event of events) {
        if (event.type === "ERROR" && event.data.code === "unavailable") {
          retry = event.data.retry ?? 1; // the relay is down: the reply goes on, try again
          continue;
        }
        if (event.type === "START" && event.id === 1 && this.lastEventId > 1 && this.conversationId) {
          // The whole turn again, from what was stored: its live log is gone. Show that.
          return this.reopen();
        }
        this.reconnector.connected();
        this.handle(event);
        if (event.type === "DONE") done = true;
      }
    } catch (error) {
      if (!done && this.conversationId) return this.reattach(retry);
      this.log.addError("The connection to the server was lost.");
    }
    if (!done && this.conversationId) return this.reattach(retry);
    await this.usagePending; // the reply's figures are shown before the turn counts as over
    this.usagePending = null;
    this.setBusy(false);
    this.dispatchEvent(new CustomEvent("turn-finished", { detail: { error: this.turnError } }));
  }

  /** Send the box's text; or `text` in place of the user message `replace` (an edit, a
   * regenerate: the conversation forks there), `before` being what the log drops for it.
   * `model`: a regenerate's other model; else the conversation's (`this.model`, the picker's).
   * While a reply runs the box's text is queued instead (queue.js). False: not sent. */
  async send({ text: given, replace = null, before = null, model = null, attachments: files = null } = {}) {
    const text = (given ?? this.input.value).trim();
    if (text && this.busy && given === undefined) this.dispatchEvent(new CustomEvent("queue", { detail: text }));
    if (!text || this.busy) return false;
    if (!this.rojoId) {
      this.log.addError("Pick a rojo first.");
      return false;
    }
    if (given === undefined) this.input.value = "";
    this.turnStarted = false;
    this.turnError = null;
    this.setBusy(true);
    if (before) {
      while (before.nextSibling) before.nextSibling.remove();
      before.remove();
    }
    const { attachments, images, pdfs, fromBox } = await this.attachedFor(text, files, replace, before);
    const bubble = this.addUser(text, { attachments: attachments.map((path) => ({ path })), images, pdfs });
    this.sentBubble = bubble;
    this.lastEventId = 0;
    // Where the message went comes with START: a key finds it if that never comes.
    const key = sentKeyMake(this.projectId);
    let response;
    try {
      // A restarting server's refusal is sent again, the bubble in place (resend.js).
      const chat = () => request(`/api/projects/${this.projectId}/chat`, {
        method: "POST",
        json: {
          rojo: this.rojoId,
          message: text,
          conversation: this.conversationId,
          replace,
          attachments,
          images: images.map((image) => image.sha256),
          pdfs: pdfs.map(({ sha256, name }) => ({ sha256, name })),
          key,
          model: model ?? this.model ?? "",
        },
        accept: "text/event-stream",
      });
      response = await this.resender.post(chat);
      sentKeyForget(this.projectId);
    } catch (error) {
      if (error instanceof ApiError) sentKeyForget(this.projectId);
      else if (key && (await this.openSent(key))) return; // stored, then its server died
      const stored = error instanceof ApiError && error.body?.conversation;
      if (stored) {
        // Stored, but its reply could not start: the message stays, in the conversation named.
        this.turnError = "not-started";
        this.joinConversation(error.body.conversation);
      } else {
        // Not sent (refused, or the server is out of reach): it goes back in the box.
        bubble.remove();
        // Ahead of what was typed while it was on its way: neither is lost.
        const typed = this.input.value;
        if (given === undefined) this.input.value = typed ? `${text}\n\n${typed}` : text;
        if (fromBox) this.images?.restore({ images, pdfs });
      }
      this.log.addError(error instanceof ApiError ? error.message : "The server could not be reached.");
      this.setBusy(false);
      return Boolean(stored);
    }
    await this.consume(readEvents(response));
  }

  /** What a message sends besides its text: the paths it `@`-mentions, its images and PDFs.
   * A queued message (`files` given) carries no images or PDFs: those in the box stay for
   * the next. An edit or a regenerate (`replace`) keeps what the message it replaces had
   * (a mentioned file while its `@path` stays in the text); else they come from the box. */
  async attachedFor(text, files, replace, before) {
    if (files) return { attachments: files, images: [], pdfs: [], fromBox: false };
    const had = replace !== null ? before?.attached : null;
    if (had) {
      const mentioned = [...had.attachments.map((a) => a.path), ...had.images.filter((i) => i.path).map((i) => i.path)];
      return {
        attachments: mentioned.filter((path) => text.includes(`@${path}`)),
        images: had.images.filter((image) => !image.path), // uploaded: a mentioned one goes by its path
        pdfs: had.pdfs,
        fromBox: false,
      };
    }
    const attachments = this.attach?.take(text) ?? [];
    const { images = [], pdfs = [] } = (await this.images?.take()) ?? {};
    return { attachments, images, pdfs, fromBox: true };
  }

  /** A user's bubble for `message` ({attachments, images, pdfs} as the API lists them),
   * which keeps them for an edit or a regenerate (`attachedFor`). */
  addUser(text, message = {}) {
    const attached = {
      attachments: message.attachments ?? [],
      images: message.images ?? [],
      pdfs: message.pdfs ?? [],
    };
    const bubble = this.log.addUser(
      text,
      attached.attachments.map((a) => a.path),
      attached.images.map((image) => imageUrl(this.projectId, image.sha256)),
      attached.pdfs.map((pdf) => pdfChip(this.projectId, pdf)),
    );
    bubble.attached = attached;
    return bubble;
  }

  /** Open the conversation the message sent with `key` went to, when no answer said
   * which (its server died before the reply started); whether there was one. */
  async openSent(key) {
    const id = await sentConversation(this.projectId, key);
    if (!id) return false;
    this.setBusy(false);
    this.joinConversation(id);
    await this.open(id);
    return true;
  }

  /** The message just sent is in this conversation (a new one, the first time). */
  joinConversation(id) {
    if (this.conversationId !== id) {
      this.conversationId = id;
      this.dispatchEvent(new CustomEvent("conversation", { detail: id }));
    }
    this.dispatchEvent(new CustomEvent("turn", { detail: id }));
  }

  /** Follow the running reply again, after a wait that grows with each failed try. */
  async reattach(hintSeconds = 0) {
    await this.reconnector.wait(hintSeconds);
    // The turn its events were of (its START's message): a conversation gone on to another
    // turn meanwhile sends that one whole, never the rest of it counted from this one's.
    const turn = this.lastEventId && this.turnMessage ? `&turn=${this.turnMessage}` : "";
    let response;
    try {
      response = await request(`/api/conversations/${this.conversationId}/stream?after=${this.lastEventId}${turn}`, {
        accept: "text/event-stream",
      });
    } catch (error) {
      if (error instanceof ApiError && error.status < 500) {
        this.log.addError(error.message); // gone, or no longer ours to see: no use retrying
        this.reconnector.connected();
        this.setBusy(false);
        return;
      }
      return this.reattach(); // the server is out of reach, or answered 503
    }
    await this.consume(readEvents(response));
  }

  /** Show the conversation as stored, the reply having ended while out of reach. */
  async reopen() {
    this.reconnector.connected();
    this.setBusy(false);
    await this.open(this.conversationId);
  }

  async stop() {
    this.stopButton.disabled = true;
    if (!this.turnStarted) {
      // The reply has no turn to stop yet (a new conversation has no id either): stop it
      // as soon as it starts.
      this.stopWanted = true;
      this.resender.stop(); // one waiting to be sent again goes back in the box
      return;
    }
    this.stopWanted = false;
    try {
      await request(`/api/conversations/${this.conversationId}/stop`, { method: "POST" });
    } catch (error) {
      this.log.addError(error instanceof ApiError ? error.message : "Could not stop the reply.");
    } finally {
      this.stopButton.disabled = false;
    }
  }

  /** Show a stored conversation; if a turn is running, re-attach and keep streaming it. */
  async open(conversationId) {
    this.conversationId = conversationId;
    this.turnError = null;
    this.log.clear();
    this.activity.clear();
    const detail = await getJson(`/api/conversations/${conversationId}`);
    this.dispatchEvent(new CustomEvent("usage", { detail: detail.usage }));
    if (!detail.running) {
      this.replay(detail.events, detail);
      this.dispatchEvent(new CustomEvent("opened", { detail }));
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
      this.replay(fresh.events, fresh);
      this.dispatchEvent(new CustomEvent("opened", { detail: fresh }));
      return;
    }
    const turnMessage = first.value.data.message;
    this.replay(eventsBefore(detail.events, turnMessage), detail);
    const own = detail.messages.find((m) => m.id === turnMessage);
    if (own) this.sentBubble = this.addUser(own.content ?? "", own);
    this.handle(first.value);
    this.setBusy(true);
    this.dispatchEvent(new CustomEvent("opened", { detail }));
    await this.consume(events);
  }
}
