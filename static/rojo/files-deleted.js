// Recently deleted, under the file tree: a deleted path's way back. Its history opens from the
// tree, which no longer shows it, so the project's deletions whose path is still absent are
// listed here, each with Restore (editors and owners), which undoes the deletion.

import { ApiError, getJson, request } from "./api.js";
import { visible } from "./visible.js";

export class DeletedFiles {
  constructor(panel, browser, { projectId, canWrite, onError }) {
    this.browser = browser;
    this.projectId = projectId;
    this.canWrite = canWrite;
    this.onError = onError;
    this.box = document.createElement("details");
    this.box.className = "recently-deleted";
    const summary = document.createElement("summary");
    summary.textContent = "Recently deleted";
    this.list = document.createElement("ul");
    this.list.setAttribute("aria-label", "Recently deleted");
    this.box.append(summary, this.list);
    panel.querySelector(".file-tree").after(this.box);
    this.box.addEventListener("toggle", () => this.refresh());
  }

  /** Reload the list if it is open (a change reached the page, or it was just opened). */
  async refresh() {
    if (!this.box.open) return;
    let entries;
    try {
      entries = await getJson(`/api/projects/${this.projectId}/files/deleted`);
    } catch (error) {
      this.list.replaceChildren(this.line(error instanceof ApiError ? error.message : "Could not load them."));
      return;
    }
    if (!entries.length) this.list.replaceChildren(this.line("Nothing deleted lately."));
    else this.list.replaceChildren(...entries.map((entry) => this.item(entry)));
  }

  line(text) {
    const li = document.createElement("li");
    li.className = "empty";
    li.append(...visible(text));
    return li;
  }

  item(entry) {
    const li = document.createElement("li");
    li.dataset.change = String(entry.change);
    li.dataset.path = entry.paths.join(", ");
    const path = document.createElement("span");
    path.className = "deleted-path";
    path.append(...visible(entry.paths.join(", ")));
    const meta = document.createElement("span");
    meta.className = "deleted-meta";
    const when = document.createElement("time");
    when.dateTime = entry.created;
    when.textContent = new Date(entry.created).toLocaleString();
    meta.append(...visible(entry.author ?? "a rojo"), " · ", when);
    li.append(path, meta);
    if (this.canWrite) {
      const restore = document.createElement("button");
      restore.type = "button";
      restore.className = "restore-deleted";
      restore.textContent = "Restore";
      restore.setAttribute("aria-label", `Restore ${entry.paths.join(", ")}`);
      restore.addEventListener("click", () => this.restore(entry.change, restore));
      li.append(restore);
    }
    return li;
  }

  async restore(change, button) {
    button.disabled = true;
    try {
      await request(`/api/projects/${this.projectId}/files/deleted/restore`, {
        method: "POST",
        json: { change },
      });
    } catch (error) {
      this.onError(error instanceof ApiError ? error.message : "Could not restore it.");
    }
    await this.browser.refresh();
    await this.refresh();
  }
}
