// The project's file browser: folders expand in place, a file opens read-only in the viewer.
// Names show their hidden characters as escapes; a file's text, only those that reorder it.

import { ApiError, getJson } from "./api.js";
import { binaryKind, FilePreview, previewKind } from "./file-preview.js";
import { visible } from "./visible.js";

function humanSize(bytes) {
  if (bytes < 1024) return `${bytes} B`;
  const units = ["KiB", "MiB", "GiB"];
  let value = bytes;
  let unit = -1;
  do {
    value /= 1024;
    unit++;
  } while (value >= 1024 && unit < units.length - 1);
  return `${value.toFixed(value < 10 ? 1 : 0)} ${units[unit]}`;
}

function join(dir, name) {
  return dir ? `${dir}/${name}` : name;
}

export class FileBrowser {
  constructor(root, projectId) {
    this.projectId = projectId;
    this.tree = root.querySelector(".file-tree");
    this.viewer = root.querySelector(".file-viewer");
    this.expandedKey = `rojo-chat:expanded:${projectId}`;
    this.expanded = new Set(this.storedExpanded()); // kept across reloads, per project
    this.changed = new Set(); // the files the latest turn changed, and the folders holding them
    this.changedDirs = new Set();
    this.openPath = null;
    // Set by the file panel's other modules: decorate(li, entry, path) adds an item's actions,
    // opened(file) follows the open file, and while `editing` a refresh leaves the file alone.
    this.decorate = null;
    this.opened = null;
    this.editing = false;
    root.querySelector(".refresh-files").addEventListener("click", () => this.refresh());
    this.viewer.querySelector(".close-file").addEventListener("click", () => this.closeFile());
    this.preview = new FilePreview(this.viewer, projectId);
  }

  storedExpanded() {
    try {
      const paths = JSON.parse(localStorage.getItem(this.expandedKey) ?? "[]");
      return Array.isArray(paths) ? paths.filter((path) => typeof path === "string") : [];
    } catch {
      return [];
    }
  }

  storeExpanded() {
    localStorage.setItem(this.expandedKey, JSON.stringify([...this.expanded]));
  }

  /** Mark `paths` (changed by the latest turn) and the folders on the way to them. */
  markChanged(paths) {
    this.changed = new Set(paths);
    this.changedDirs = new Set();
    for (const path of paths) {
      const parts = path.split("/");
      for (let i = 1; i < parts.length; i++) this.changedDirs.add(parts.slice(0, i).join("/"));
    }
    for (const li of this.tree.querySelectorAll("li[data-path]")) this.showChanged(li);
  }

  showChanged(li) {
    const path = li.dataset.path;
    const changed = this.changed.has(path);
    li.classList.toggle("changed", changed);
    li.classList.toggle("holds-changed", this.changedDirs.has(path));
    const button = li.querySelector(".entry");
    if (changed) button.title = "Changed by the latest turn";
    else button.removeAttribute("title");
  }

  url(suffix, path) {
    return `/api/projects/${this.projectId}/files${suffix}?path=${encodeURIComponent(path)}`;
  }

  /** Reload every expanded folder and the open file, keeping what the user had open.
   * Refreshes asked for while one runs (a change of one's own and its live news) make one
   * more after it, never two filling the same list at once. */
  async refresh() {
    if (this.refreshing) {
      this.refreshAgain = true;
      return this.refreshing;
    }
    this.refreshing = (async () => {
      do {
        this.refreshAgain = false;
        if (this.change) await this.change.catch(() => {});
        await this.fill(this.tree, "");
        if (this.openPath !== null && !this.editing) await this.openFile(this.openPath, { quiet: true });
      } while (this.refreshAgain);
    })();
    try {
      await this.refreshing;
    } finally {
      this.refreshing = null;
    }
  }

  /** Run `change` (a request that moves, deletes or makes files) with no refresh reading
   * at the same time: one under way finishes first, and one asked for meanwhile waits for
   * the change, so the page never asks for a path the change has just moved or deleted. */
  async changing(change) {
    while (this.refreshing || this.change) await (this.refreshing || this.change).catch(() => {});
    this.change = change();
    try {
      return await this.change;
    } finally {
      this.change = null;
    }
  }

  /** List `dir` into `list`. Entries still there keep their elements, in place: a refresh
   * (a rojo's turn brings one with each batch of changes) must not swap the element under a
   * pointer between its press and its release, which loses the click, nor drop the focus. */
  async fill(list, dir) {
    let entries;
    try {
      entries = await getJson(this.url("", dir));
    } catch (error) {
      const li = document.createElement("li");
      li.className = "file-error";
      li.append(...visible(error instanceof ApiError ? error.message : "Could not load the files."));
      list.replaceChildren(li);
      return;
    }
    const shown = new Map();
    for (const li of list.children) {
      if (li.dataset.path !== undefined) shown.set(`${li.dataset.type}:${li.dataset.path}`, li);
    }
    const items = [];
    for (const entry of entries) {
      const kept = shown.get(`${entry.type}:${join(dir, entry.name)}`);
      items.push(kept ? await this.update(kept) : await this.item(entry, dir));
    }
    if (!items.length) {
      const li = document.createElement("li");
      li.className = "empty";
      li.textContent = dir ? "(empty)" : "No files yet.";
      items.push(li);
    }
    // What went is taken out first, so that what stays is never moved to make room.
    const staying = new Set(items);
    for (const li of [...list.children]) if (!staying.has(li)) li.remove();
    let next = list.firstElementChild;
    for (const li of items) {
      if (li === next) next = next.nextElementSibling;
      else list.insertBefore(li, next);
    }
  }

  /** An entry's element kept by a refresh, brought up to date: its marks, and a folder's
   * contents listed again when it is open. */
  async update(li) {
    const path = li.dataset.path;
    this.showChanged(li);
    const button = li.querySelector(".entry");
    if (li.dataset.type === "directory") {
      const children = li.querySelector(":scope > ul");
      const open = this.expanded.has(path);
      button.setAttribute("aria-expanded", String(open));
      if (open) await this.fill(children, path);
      else children.replaceChildren();
    } else {
      button.toggleAttribute("aria-current", path === this.openPath);
    }
    return li;
  }

  async item(entry, dir) {
    const path = join(dir, entry.name);
    const li = document.createElement("li");
    li.dataset.path = path;
    li.dataset.type = entry.type;
    const button = document.createElement("button");
    button.type = "button";
    button.className = `entry ${entry.type}`;
    const name = document.createElement("span");
    name.className = "name";
    name.append(...visible(entry.name));
    button.append(name);
    li.append(button);
    this.showChanged(li);
    if (entry.type === "directory") {
      const children = document.createElement("ul");
      li.append(children);
      const open = this.expanded.has(path);
      button.setAttribute("aria-expanded", String(open));
      button.addEventListener("click", () => this.toggle(button, children, path));
      if (open) await this.fill(children, path);
    } else {
      button.addEventListener("click", () => this.openFile(path));
      if (path === this.openPath) button.setAttribute("aria-current", "true");
    }
    this.decorate?.(li, entry, path);
    return li;
  }

  async toggle(button, children, path) {
    if (this.expanded.has(path)) {
      this.expanded.delete(path);
      this.storeExpanded();
      button.setAttribute("aria-expanded", "false");
      children.replaceChildren();
    } else {
      this.expanded.add(path);
      this.storeExpanded();
      button.setAttribute("aria-expanded", "true");
      await this.fill(children, path);
    }
  }

  async openFile(path, { quiet = false } = {}) {
    this.openPath = path;
    this.viewer.hidden = false;
    const name = this.viewer.querySelector(".file-name");
    const meta = this.viewer.querySelector(".file-meta");
    const content = this.viewer.querySelector(".file-content");
    name.replaceChildren(...visible(path));
    if (!quiet) {
      meta.textContent = "";
      content.textContent = "Loading…";
    }
    for (const button of this.tree.querySelectorAll(".entry.file")) {
      const current = button.parentElement.dataset.path === path;
      button.toggleAttribute("aria-current", current);
    }
    const kind = previewKind(path);
    try {
      if (binaryKind(kind)) {
        // A picture or a PDF: its preview only, no text.
        const file = await getJson(this.url("/preview", path));
        if (this.openPath !== path) return;
        this.showMeta(file);
        content.replaceChildren();
        content.classList.remove("error");
        this.opened?.(null);
        await this.preview.show(path, kind, { modifiedAt: file.modifiedAt });
        return;
      }
      const file = await getJson(this.url("/content", path));
      if (this.openPath !== path) return; // another file was opened, or this one closed, meanwhile
      this.showMeta(file);
      content.replaceChildren(...visible(file.text, { prose: true }));
      content.classList.remove("error");
      this.opened?.(file);
      await this.preview.show(path, kind, { text: file.text, modifiedAt: file.modifiedAt });
    } catch (error) {
      if (this.openPath !== path) return;
      meta.textContent = "";
      this.preview.clear();
      this.opened?.(null);
      const message = error instanceof ApiError ? error.message : "Could not open the file.";
      content.replaceChildren(...visible(message));
      content.classList.add("error");
    }
  }

  /** The open file's size and time, as `file` (a /content or /preview answer) gives them. */
  showMeta(file) {
    const meta = this.viewer.querySelector(".file-meta");
    meta.textContent = `${humanSize(file.size)} · modified ${new Date(file.modifiedAt).toLocaleString()}`;
  }

  closeFile() {
    this.openPath = null;
    this.preview.clear();
    this.viewer.hidden = true;
    this.opened?.(null);
  }
}
