// One history per file: every recorded change to the open file (a person's, a rojo's, an
// upload, a restore), with who, when and the diff, and "Restore" to the version before one.

import { ApiError, getJson, request } from "./api.js";
import { visible } from "./visible.js";

const ORIGINS = { rojo: "rojo", person: "edit", upload: "upload", restore: "restore", mcp: "MCP" };

export class FileHistory {
  constructor(viewer, browser, { projectId, canWrite, onError }) {
    this.viewer = viewer;
    this.browser = browser;
    this.projectId = projectId;
    this.canWrite = canWrite;
    this.onError = onError;
    this.panel = document.createElement("section");
    this.panel.className = "file-history";
    this.panel.hidden = true;
    this.panel.setAttribute("aria-label", "File history");
    viewer.append(this.panel);
    this.toggleButton = document.createElement("button");
    this.toggleButton.type = "button";
    this.toggleButton.className = "show-history";
    this.toggleButton.textContent = "History";
    this.toggleButton.setAttribute("aria-expanded", "false");
    this.toggleButton.addEventListener("click", () => this.toggle());
    viewer.querySelector(".close-file").before(this.toggleButton);
  }

  get path() {
    return this.browser.openPath;
  }

  async toggle() {
    const open = this.panel.hidden;
    this.panel.hidden = !open;
    this.toggleButton.setAttribute("aria-expanded", String(open));
    if (open) await this.load();
  }

  /** Reload the list if it is shown (the file changed, or another was opened). */
  async refresh() {
    if (!this.panel.hidden) await this.load();
  }

  async load() {
    const path = this.path;
    if (path === null) return;
    let entries;
    try {
      entries = await getJson(`/api/projects/${this.projectId}/files/history?path=${encodeURIComponent(path)}`);
    } catch (error) {
      this.panel.replaceChildren(...visible(error instanceof ApiError ? error.message : "Could not load the history."));
      return;
    }
    const list = document.createElement("ol");
    list.className = "history-list";
    for (const entry of entries) list.append(this.item(entry, path));
    if (!entries.length) {
      const none = document.createElement("p");
      none.className = "empty";
      none.textContent = "No recorded changes to this file yet.";
      this.panel.replaceChildren(none);
    } else this.panel.replaceChildren(list);
  }

  item(entry, path) {
    const li = document.createElement("li");
    li.dataset.change = String(entry.change);
    const head = document.createElement("div");
    head.className = "history-head";
    const who = document.createElement("strong");
    who.append(...visible(entry.author ?? "someone"));
    const what = document.createElement("span");
    what.className = `history-origin origin-${entry.origin}`;
    what.textContent = `${ORIGINS[entry.origin] ?? entry.origin} · ${entry.tool}`;
    const when = document.createElement("time");
    when.dateTime = entry.created;
    when.textContent = new Date(entry.created).toLocaleString();
    head.append(who, " ", what, " ", when);
    if (entry.undone) head.append(" (undone)");
    if (this.canWrite && entry.versionFrom !== null) {
      head.append(this.restoreButton("Restore this version", "restore-this", entry.versionFrom, path));
    }
    if (this.canWrite && entry.restorable) {
      head.append(this.restoreButton("Restore the version before", "restore", entry.change, path));
    }
    li.append(head);
    if (entry.diff) {
      const diff = document.createElement("pre");
      diff.className = "history-diff";
      diff.append(...visible(entry.diff, { prose: true }));
      li.append(diff);
    }
    return li;
  }

  restoreButton(label, className, change, path) {
    const restore = document.createElement("button");
    restore.type = "button";
    restore.className = className;
    restore.textContent = label;
    restore.addEventListener("click", () => this.restore(change, path));
    return restore;
  }

  async restore(change, path) {
    try {
      await request(`/api/projects/${this.projectId}/files/restore`, {
        method: "POST",
        json: { change, path },
      });
    } catch (error) {
      this.onError(error instanceof ApiError ? error.message : "Could not restore it.");
    }
    await this.browser.refresh();
    await this.load();
  }
}
