// `@` in the message box attaches a project file: typing `@` and part of a path offers the
// project's entries (from the file tree's listings); a file picked becomes `@path` in the
// text and a chip above the box. What is attached goes with the message, its text to the model.

import { getJson } from "./api.js";
import { visible } from "./visible.js";

const TOKEN = /(^|\s)@([^\s@]*)$/;

export class Attachments {
  constructor(form, input, projectId) {
    this.input = input;
    this.projectId = projectId;
    this.picked = new Set();
    this.listings = new Map();
    this.active = 0;
    this.chips = document.createElement("div");
    this.chips.className = "attachment-chips";
    this.chips.hidden = true;
    this.menu = document.createElement("ul");
    this.menu.className = "attach-suggestions";
    this.menu.setAttribute("role", "listbox");
    this.menu.setAttribute("aria-label", "Files to attach");
    this.menu.hidden = true;
    input.before(this.chips);
    input.after(this.menu);
    input.addEventListener("input", () => this.suggest());
    // Captured on the form, so that Enter picks a suggestion instead of sending.
    form.addEventListener("keydown", (event) => this.key(event), { capture: true });
    input.addEventListener("blur", () => setTimeout(() => this.close(), 150));
  }

  token() {
    const before = this.input.value.slice(0, this.input.selectionStart);
    const match = before.match(TOKEN);
    return match ? match[2] : null;
  }

  async listing(dir) {
    if (!this.listings.has(dir)) {
      const url = `/api/projects/${this.projectId}/files?path=${encodeURIComponent(dir)}`;
      this.listings.set(dir, getJson(url).catch(() => []));
    }
    return this.listings.get(dir);
  }

  async suggest() {
    const query = this.token();
    if (query === null) return this.close();
    const cut = query.lastIndexOf("/");
    const dir = cut < 0 ? "" : query.slice(0, cut);
    const prefix = query.slice(cut + 1).toLowerCase();
    const entries = (await this.listing(dir)).filter((e) => e.name.toLowerCase().startsWith(prefix));
    if (this.token() !== query) return;  // typed on meanwhile
    this.options = entries.slice(0, 8).map((e) => ({ ...e, path: dir ? `${dir}/${e.name}` : e.name }));
    if (!this.options.length) return this.close();
    this.active = 0;
    this.render();
  }

  render() {
    this.menu.replaceChildren(
      ...this.options.map((option, index) => {
        const li = document.createElement("li");
        li.setAttribute("role", "option");
        li.setAttribute("aria-selected", String(index === this.active));
        li.className = option.type;
        li.append(...visible(option.type === "directory" ? `${option.path}/` : option.path));
        li.addEventListener("mousedown", (event) => {
          event.preventDefault();
          this.pick(option);
        });
        return li;
      }),
    );
    this.menu.hidden = false;
  }

  close() {
    this.menu.hidden = true;
    this.options = [];
  }

  key(event) {
    if (this.menu.hidden || !this.options.length) return;
    const moves = { ArrowDown: 1, ArrowUp: -1 };
    if (event.key in moves) {
      this.active = (this.active + moves[event.key] + this.options.length) % this.options.length;
      this.render();
    } else if (event.key === "Enter" || event.key === "Tab") {
      this.pick(this.options[this.active]);
    } else if (event.key === "Escape") {
      this.close();
    } else return;
    event.preventDefault();
    event.stopPropagation();
  }

  /** Put the option in place of the `@…` being typed; a folder goes on to its entries. */
  pick(option) {
    const caret = this.input.selectionStart;
    const before = this.input.value.slice(0, caret).replace(/@[^\s@]*$/, "");
    const folder = option.type === "directory";
    const inserted = `@${option.path}${folder ? "/" : " "}`;
    this.input.value = before + inserted + this.input.value.slice(caret);
    const at = before.length + inserted.length;
    this.input.setSelectionRange(at, at);
    this.input.focus();
    if (folder) return this.suggest();
    this.picked.add(option.path);
    this.showChips();
    this.close();
  }

  showChips() {
    this.chips.hidden = !this.picked.size;
    this.chips.replaceChildren(
      ...[...this.picked].map((path) => {
        const chip = attachmentChip(path);
        const remove = document.createElement("button");
        remove.type = "button";
        remove.textContent = "×";
        remove.setAttribute("aria-label", `Do not attach ${path}`);
        remove.addEventListener("click", () => {
          this.picked.delete(path);
          this.showChips();
        });
        chip.append(remove);
        return chip;
      }),
    );
  }

  /** The files to send with `text`: those picked whose `@path` is still in it. */
  take(text) {
    const paths = [...this.picked].filter((path) => text.includes(`@${path}`));
    this.picked.clear();
    this.showChips();
    return paths;
  }
}

export function attachmentChip(path) {
  const chip = document.createElement("span");
  chip.className = "attachment-chip";
  chip.title = `Attached: ${path}`;
  chip.append(...visible(path));
  return chip;
}
