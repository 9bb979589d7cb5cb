// Undo: a button after each call that changed files, and one after each turn that did.

import { changedPaths } from "./activity.js";
import { ApiError, request } from "./api.js";
import { visible } from "./visible.js";

export class UndoButtons {
  /** Buttons in `log` (a ChatLog); `conversationId()` names the open conversation, and
   * `onUndone()` runs once files went back. */
  constructor(log, { canWrite, conversationId, onUndone }) {
    this.log = log;
    this.canWrite = canWrite;
    this.conversationId = conversationId;
    this.onUndone = onUndone;
  }

  /** The call on `line` made `change`: offer its Undo, or show it undone already. */
  track(line, change, { undone = false } = {}) {
    line.dataset.change = String(change);
    if (undone) this.markUndone(change);
    else if (this.canWrite) this.offer(line, change);
  }

  offer(line, change) {
    const button = document.createElement("button");
    button.type = "button";
    button.className = "undo";
    button.textContent = "Undo";
    button.title = "Put the files back as they were before this call";
    button.setAttribute("aria-label", `Undo ${line.querySelector(".call").textContent}`);
    button.addEventListener("click", () => this.run(`/api/changes/${change}/undo`, {}, button));
    // Under the line, not in its <summary>: a button inside the summary (itself a button)
    // is a control within a control, which assistive technology cannot reach.
    line.after(button);
    line.undoButton = button;
  }

  /** After a turn that changed files: one button to undo all of it. */
  offerTurn(userMessageId, changes) {
    if (!this.canWrite || !userMessageId || !changes.length) return;
    const button = document.createElement("button");
    button.type = "button";
    button.className = "undo undo-turn";
    button.textContent = "Undo this turn";
    button.changes = changes;
    button.addEventListener("click", () => {
      if (!button.confirmBox?.isConnected) this.confirmTurn(button, userMessageId);
    });
    this.log.append(button);
  }

  /** Ask before undoing a turn, listing the files that would change back. */
  confirmTurn(button, userMessageId) {
    const log = this.log.element;
    const paths = new Set();
    for (const id of button.changes) {
      const line = log.querySelector(`.tool-line[data-change="${id}"]:not(.undone)`);
      for (const path of changedPaths(line?.args)) paths.add(path);
    }
    const box = document.createElement("div");
    box.className = "undo-confirm";
    box.setAttribute("role", "group");
    box.setAttribute("aria-label", "Undo this turn?");
    const question = document.createElement("p");
    question.textContent = "Undo this turn? These files go back to how they were before it:";
    const list = document.createElement("ul");
    for (const path of paths) {
      const item = document.createElement("li");
      item.append(...visible(path));
      list.append(item);
    }
    const confirm = document.createElement("button");
    confirm.type = "button";
    confirm.className = "primary";
    confirm.textContent = "Undo these changes";
    const cancel = document.createElement("button");
    cancel.type = "button";
    cancel.textContent = "Cancel";
    const close = () => {
      box.remove();
      button.hidden = false;
      button.focus();
    };
    cancel.addEventListener("click", close);
    // Esc answers "no" as Cancel does, and is not also taken as Esc for Stop.
    box.addEventListener("keydown", (event) => {
      if (event.key !== "Escape" || event.isComposing || cancel.disabled) return;
      event.stopPropagation();
      close();
    });
    confirm.addEventListener("click", async () => {
      cancel.disabled = true;
      const path = `/api/conversations/${this.conversationId()}/undo-turn`;
      if (await this.run(path, { message: userMessageId }, confirm)) {
        box.remove();
        button.remove();
      } else {
        cancel.disabled = false;
      }
    });
    const actions = document.createElement("div");
    actions.className = "undo-confirm-actions";
    actions.append(confirm, cancel);
    box.append(question, list, actions);
    button.after(box);
    button.hidden = true;
    button.confirmBox = box;
    confirm.focus();
  }

  markUndone(change) {
    const log = this.log.element;
    const line = log.querySelector(`.tool-line[data-change="${change}"]`);
    if (!line) return;
    line.classList.add("undone");
    line.undoButton?.remove();
    const outcome = line.querySelector(".outcome");
    if (!outcome.textContent.endsWith("(undone)")) outcome.append(" (undone)");
    // A turn whose changes were all undone one by one has nothing left to undo.
    for (const button of log.querySelectorAll(".undo-turn")) {
      if (button.changes.every((id) => log.querySelector(`.tool-line.undone[data-change="${id}"]`))) {
        button.remove();
      }
    }
  }

  /** Undo through `path`; the button stays disabled while it runs. True when it worked. */
  async run(path, json, button) {
    button.disabled = true;
    try {
      const response = await request(path, { method: "POST", json });
      const { undone } = await response.json();
      for (const change of undone) this.markUndone(change);
      this.onUndone();
      return true;
    } catch (error) {
      button.disabled = false;
      this.log.addError(error instanceof ApiError ? error.message : "The undo failed.");
      return false;
    }
  }
}
