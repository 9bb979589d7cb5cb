// One queued message under the log: its text (as text, hidden characters shown), its attached
// files as chips, and Edit and Remove buttons. Edit turns the text into a box in place: Enter
// or Save keeps the new text, Esc or Cancel the old one.

import { attachmentChip } from "./attach.js";
import { visible } from "./visible.js";

function button(label, name, onClick) {
  const b = document.createElement("button");
  b.type = "button";
  b.textContent = label;
  b.setAttribute("aria-label", name);
  b.addEventListener("click", onClick);
  return b;
}

/** The list item for `item` (number `n`); `onEdit(text)` and `onRemove()` change the queue;
 * `onEditing(open)` says when its box opens and closes (the queue waits meanwhile). */
export function queuedMessage(item, n, { onEdit, onRemove, onEditing }) {
  const li = document.createElement("li");
  li.className = "queued-message";
  li.dataset.id = item.id;
  const label = document.createElement("span");
  label.className = "queued-label";
  label.textContent = `Queued ${n}`;
  const text = document.createElement("div");
  text.className = "queued-text";
  text.append(...visible(item.text, { prose: true }));
  const actions = document.createElement("div");
  actions.className = "queued-actions";
  const edit = button("Edit", `Edit queued item ${n}`, () => editStart());
  const remove = button("Remove", `Remove queued item ${n}`, onRemove);
  actions.append(edit, remove);
  li.append(label, text);
  if (item.attachments?.length) {
    const chips = document.createElement("div");
    chips.className = "attachment-chips";
    chips.append(...item.attachments.map((path) => attachmentChip(path)));
    li.append(chips);
  }
  li.append(actions);

  function editStart() {
    const box = document.createElement("textarea");
    box.className = "queued-edit";
    box.rows = 2;
    box.value = item.text;
    box.setAttribute("aria-label", `Queued item ${n}`);
    const save = button("Save", `Save queued item ${n}`, () => done(true));
    const cancel = button("Cancel", `Keep queued item ${n} as it was`, () => done(false));
    const done = (keep) => {
      const edited = box.value.trim();
      if (keep && edited && edited !== item.text) return onEdit(edited); // shown again, whole
      box.replaceWith(text);
      actions.replaceChildren(edit, remove);
      edit.focus();
      onEditing(false);
    };
    box.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        done(true);
      } else if (event.key === "Escape") {
        event.preventDefault();
        event.stopPropagation(); // Esc here leaves the edit; it does not stop the reply
        done(false);
      }
    });
    text.replaceWith(box);
    actions.replaceChildren(save, cancel);
    box.focus();
    onEditing(true);
  }
  return li;
}
