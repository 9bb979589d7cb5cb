// Type while it works: while a reply runs, Enter (or Queue) puts the box's message in a queue
// shown under the log, each editable and removable, and the queue is sent one message at a time,
// in order, as each reply ends. "Stop and send" stops the reply first. After an error or a
// plain Stop the queue waits (paused, shown) for the person to send it on: sending into a
// failed turn, or after they stopped the rojo, is rarely what they meant. So does a queue found
// on opening a conversation whose reply is over: nothing is sent without a reply ending here.

import { agreeing, counted } from "./counted.js";
import { queueItem, queueKey, queueMove, queueRead, queueTakeFirst, queueWrite } from "./queue-store.js";
import { queuedMessage } from "./queue-items.js";

const CLEAR = 0; // what follows a turn's end waits for the page's other listeners to see it

function actionButton(label, className, title) {
  const b = document.createElement("button");
  b.type = "button";
  b.className = className;
  b.textContent = label;
  b.title = title;
  b.hidden = true;
  return b;
}

export class MessageQueue {
  constructor(chat, { projectId, person }) {
    this.chat = chat;
    this.projectId = projectId;
    this.person = person; // the queue is this person's: a browser may be shared
    this.key = queueKey(person, projectId, chat.conversationId);
    this.paused = true; // until a reply is seen running here: a reload sends nothing by itself
    this.stopAndSend = false;
    this.inFlight = null;
    this.placeholder = chat.input.placeholder;
    this.editing = false; // a queued message's box is open: the queue waits for it
    this.shown = null; // the items the list shows, as JSON: it is redrawn only when they change
    this.section = document.createElement("section");
    this.section.className = "message-queue";
    this.section.setAttribute("aria-label", "Queue");
    this.note = document.createElement("p");
    this.note.className = "queue-note";
    this.resume = actionButton("Send queued", "queue-resume", "Send the queued messages now, in order");
    this.resume.addEventListener("click", () => this.sendOn());
    this.list = document.createElement("ol");
    this.list.className = "queue-items";
    this.section.append(this.note, this.resume, this.list);
    this.status = document.createElement("p");
    this.status.className = "visually-hidden queue-status";
    this.status.setAttribute("role", "status");
    this.status.setAttribute("aria-live", "polite");
    chat.element.querySelector(".messages").after(this.section, this.status);

    const actions = chat.element.querySelector(".composer-actions");
    this.queueButton = actionButton("Queue", "queue-add", "Queue this message: it is sent when the reply ends");
    this.queueButton.addEventListener("click", () => {
      this.add(chat.input.value.trim());
      chat.input.focus(); // the button is disabled now, the box empty for the next one
    });
    this.stopSend = actionButton("Stop and send", "stop-and-send", "Stop the reply, then send the first queued message");
    this.stopSend.addEventListener("click", () => this.stopThenSend());
    actions.querySelector(".send").before(this.stopSend, this.queueButton);

    chat.addEventListener("queue", (event) => this.add(event.detail));
    chat.addEventListener("busy", () => this.render());
    chat.addEventListener("turn-finished", (event) => {
      const error = event.detail?.error ?? null;
      setTimeout(() => this.settle(error), CLEAR);
    });
    chat.addEventListener("opened", () => this.opened());
    chat.addEventListener("conversation", (event) => this.moveTo(event.detail));
    chat.input.addEventListener("input", () => this.render());
    window.addEventListener("storage", (event) => {
      if (event.key === this.key) this.render(); // another tab of this conversation changed it
    });
    this.render();
  }

  items() {
    return queueRead(this.key);
  }

  /** Queue `text` with the files picked for it; the box empties for the next one. */
  add(text) {
    if (!text) return;
    const item = queueItem(text, this.chat.attach?.take(text) ?? []);
    const items = [...this.items(), item];
    queueWrite(this.key, items);
    this.chat.input.value = "";
    if (this.chat.busy) this.paused = false; // queued to follow this reply
    this.render();
    const waiting = `${counted(items.length, "message")} ${agreeing(items.length, "waits", "wait")}`;
    this.announce(`Queued. ${waiting} for the reply to end.`);
  }

  edit(id, text) {
    const items = this.items().map((item) => {
      if (item.id !== id) return item;
      // An attachment stays while its `@path` is still in the text, as when sending.
      return { ...item, text, attachments: item.attachments.filter((path) => text.includes(`@${path}`)) };
    });
    queueWrite(this.key, items);
    this.editing = false;
    this.render();
    this.list.querySelector(`li[data-id="${id}"] .queued-actions button`)?.focus();
    this.announce("Queued message changed.");
    this.send(); // the reply may have ended while it was edited
  }

  editingSet(open) {
    this.editing = open;
    if (!open) this.send();
  }

  remove(id) {
    const items = this.items();
    const index = items.findIndex((item) => item.id === id);
    if (index < 0) return;
    items.splice(index, 1);
    queueWrite(this.key, items);
    this.render();
    const next = this.list.querySelectorAll(".queued-message")[Math.min(index, items.length - 1)];
    (next?.querySelector(".queued-actions button:last-child") ?? this.chat.input).focus();
    this.announce(items.length ? "Queued message removed." : "Queued message removed; none left.");
  }

  /** Stop the reply (its acknowledgement comes as usual), then send the queue on. */
  stopThenSend() {
    this.add(this.chat.input.value.trim());
    this.stopAndSend = true;
    this.paused = false;
    this.chat.stop();
  }

  /** A stored conversation is shown: a reply still running there is followed, and the
   * queue follows it; a reply over while the page reconnected lets the queue go on. */
  opened() {
    if (this.chat.busy) this.paused = false;
    else setTimeout(() => this.send(), CLEAR);
    this.render();
  }

  /** The reply ended: send on, or wait after an error or a plain Stop. */
  settle(error) {
    const stopped = error === "stopped";
    const go = !error || (stopped && this.stopAndSend);
    this.stopAndSend = false;
    if (this.chat.busy || this.paused || !this.items().length) return this.render();
    if (go) return this.send();
    this.pause(stopped ? "Stopped: the queue waits." : "The reply ended with an error: the queue waits.");
  }

  pause(reason) {
    this.paused = true;
    this.reason = reason;
    this.render();
    if (this.items().length) this.announce(reason);
  }

  /** The person sends the paused queue on. */
  sendOn() {
    this.paused = false;
    this.reason = "";
    this.send();
  }

  /** Send the oldest queued message, unless a reply runs or the queue waits. */
  async send() {
    if (this.chat.busy || this.paused || this.inFlight || this.editing) return;
    const item = queueTakeFirst(this.key);
    if (!item) return this.render();
    this.inFlight = item;
    this.render();
    let sent;
    try {
      sent = await this.chat.send({ text: item.text, attachments: item.attachments });
    } finally {
      this.inFlight = null;
    }
    if (sent === false) {
      // Not sent (refused, or the server out of reach): first in the queue again, waiting.
      queueWrite(this.key, [item, ...this.items()]);
      this.pause("Not sent: the queue waits.");
    } else if (this.chat.turnError === "not-started") {
      this.pause("The reply could not start: the queue waits.");
    }
  }

  /** The conversation got its id (a new one, at START) or the panel shows another. */
  moveTo(conversationId) {
    const key = queueKey(this.person, this.projectId, conversationId);
    if (this.key === queueKey(this.person, this.projectId, null)) queueMove(this.key, key);
    this.key = key;
    this.render();
  }

  announce(text) {
    this.status.textContent = text;
  }

  render() {
    const items = this.items();
    const busy = this.chat.busy;
    this.section.hidden = !items.length;
    this.note.textContent = busy
      ? "Queued: sent one at a time, in order, when the reply ends."
      : (this.paused && this.reason) || "Queued, not sent yet.";
    this.resume.hidden = busy || !items.length;
    const shown = JSON.stringify(items);
    if (shown !== this.shown) {
      this.shown = shown;
      this.editing = false;
      this.list.replaceChildren(
        ...items.map((item, index) =>
          queuedMessage(item, index + 1, {
            onEdit: (text) => this.edit(item.id, text),
            onRemove: () => this.remove(item.id),
            onEditing: (open) => this.editingSet(open),
          }),
        ),
      );
    }
    this.chat.input.placeholder = busy
      ? "Type the next message (Enter queues it until the reply ends)"
      : this.placeholder;
    const typed = Boolean(this.chat.input.value.trim());
    this.queueButton.hidden = !busy;
    this.queueButton.disabled = !typed;
    this.stopSend.hidden = !busy || (!typed && !items.length); // shown when there is something to send
  }
}
