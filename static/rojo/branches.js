// Edit, regenerate and retry, and the `< 2/3 >` switch between branches, on the chat's user
// messages. An edit or a regenerate sends a message in place of one (the server forks the
// conversation there, rojos/agent/branches.py); a switch asks the server for the branch through a
// message and shows the conversation again. Nothing here runs while a reply streams.

import { ApiError, getJson, request } from "./api.js";
import { icon } from "./icons.js";

function button(label, title, onClick) {
  const b = document.createElement("button");
  b.type = "button";
  b.append(...[label].flat()); // text, or an icon and its text
  b.title = title;
  b.setAttribute("aria-label", title);
  b.addEventListener("click", onClick);
  return b;
}

export class Branches {
  constructor(chat) {
    this.chat = chat;
    this.choices = {}; // message id -> the ids of its alternatives, oldest first
    chat.addEventListener("opened", (event) => {
      this.choices = event.detail.choices ?? {};
      this.decorate();
    });
    chat.addEventListener("turn", () => this.element.querySelector(".turn-actions")?.remove());
    chat.addEventListener("turn-finished", () => this.refresh());
    chat.addEventListener("busy", () => this.holdWhileBusy(this.element));
  }

  /** While a reply runs, Edit and the branch switch can do nothing: they show as disabled
   * (a reopened conversation whose reply still runs drew them enabled), and come back after. */
  holdWhileBusy(root) {
    for (const b of root.querySelectorAll(".message-tools button")) {
      if (this.chat.busy && !b.disabled) {
        b.disabled = true;
        b.dataset.held = "";
      } else if (!this.chat.busy && "held" in b.dataset) {
        b.disabled = false;
        delete b.dataset.held;
      }
    }
  }

  get element() {
    return this.chat.log.element;
  }

  /** After a live turn: the controls at once, as a reopened conversation has them; then
   * again if the choices changed (an edit or a regenerate made one more). */
  async refresh() {
    this.decorate();
    const id = this.chat.conversationId;
    if (!id) return;
    let choices;
    try {
      choices = (await getJson(`/api/conversations/${id}`)).choices ?? {};
    } catch {
      return; // the controls stay as drawn
    }
    if (JSON.stringify(choices) === JSON.stringify(this.choices) || this.chat.busy) return;
    this.choices = choices;
    this.decorate();
  }

  decorate() {
    for (const bubble of this.element.querySelectorAll(".bubble.user[data-message]")) {
      this.decorateUser(bubble);
    }
    this.offerRegenerate();
  }

  /** The tools under a user message: Edit, and the branch switch when it has alternatives. */
  decorateUser(bubble) {
    // Its tools of before, wherever they are now: a plan drawn after them goes between.
    bubble.tools?.remove();
    const id = Number(bubble.dataset.message);
    const tools = document.createElement("div");
    tools.className = "message-tools";
    const choices = this.choices[String(id)];
    if (choices && choices.length > 1) {
      const index = choices.indexOf(id);
      const nav = document.createElement("span");
      nav.className = "branch-switch";
      const previous = button("‹", "Previous version", () => this.switchTo(choices[index - 1]));
      const following = button("›", "Next version", () => this.switchTo(choices[index + 1]));
      previous.disabled = index <= 0;
      following.disabled = index >= choices.length - 1;
      const where = document.createElement("span");
      where.className = "branch-position";
      where.textContent = `${index + 1}/${choices.length}`;
      nav.append(previous, where, following);
      tools.append(nav);
    }
    tools.append(button([icon("edit"), " Edit"], "Edit and send again", () => this.edit(bubble, tools)));
    bubble.tools = tools;
    bubble.after(tools);
    this.holdWhileBusy(tools);
  }

  /** Under the last reply: send its question again (Retry after an error or a Stop). */
  offerRegenerate() {
    this.element.querySelector(".turn-actions")?.remove();
    const asked = [...this.element.querySelectorAll(".bubble.user[data-message]")].at(-1);
    if (!asked || this.chat.busy) return;
    let failed = false;
    for (let node = asked.nextElementSibling; node; node = node.nextElementSibling) {
      if (node.classList.contains("chat-error")) failed = true;
    }
    const actions = document.createElement("div");
    actions.className = "turn-actions";
    const label = failed ? "Retry" : "Regenerate";
    // The name starts with the visible word, so speech control finds the button by it.
    const title = `${label}: ${failed ? "send this question again" : "ask for another reply to this question"}`;
    actions.append(button([icon("refresh"), ` ${label}`], title, () => this.resend(asked, asked.text ?? "")));
    this.chat.log.append(actions); // in view for a reader at the end
    // Others add their choices beside it (model-picker.js: "Regenerate with" another model).
    this.chat.dispatchEvent(new CustomEvent("regenerate-offered", { detail: { actions, asked } }));
  }

  /** Send `text` in place of the user message `bubble`; what followed it leaves the log. */
  resend(bubble, text) {
    if (this.chat.busy || !text.trim()) return;
    this.chat.send({ text, replace: Number(bubble.dataset.message), before: bubble });
  }

  edit(bubble, tools) {
    if (this.chat.busy) return;
    const form = document.createElement("form");
    form.className = "message-edit";
    const box = document.createElement("textarea");
    box.value = bubble.text ?? "";
    box.rows = Math.min(8, Math.max(2, box.value.split("\n").length));
    box.setAttribute("aria-label", "Edited text");
    const send = document.createElement("button");
    send.type = "submit";
    send.className = "primary";
    send.textContent = "Send";
    const cancel = button("Cancel", "Keep the message as it is", () => {
      form.replaceWith(tools);
      bubble.hidden = false;
      this.holdWhileBusy(tools);
    });
    form.append(box, send, cancel);
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      // Nothing to send, or a reply runs: the box stays, what is typed in it too.
      if (!box.value.trim() || this.chat.busy) return;
      form.remove();
      bubble.hidden = false;
      this.resend(bubble, box.value);
    });
    box.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
        event.preventDefault(); // no line break in a box that stays
        form.requestSubmit();
      }
      if (event.key === "Escape") cancel.click();
    });
    bubble.hidden = true;
    tools.replaceWith(form);
    box.focus();
  }

  /** Show the branch through message `id`: the server picks its newest; then redraw. */
  async switchTo(id) {
    if (this.chat.busy || id === undefined) return;
    const conversation = this.chat.conversationId;
    try {
      await request(`/api/conversations/${conversation}/branch`, { method: "POST", json: { message: id } });
    } catch (error) {
      this.chat.addError(error instanceof ApiError ? error.message : "Could not switch branches.");
      return;
    }
    await this.chat.open(conversation);
  }
}
