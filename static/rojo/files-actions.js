// The file tree's actions: new file and folder, rename, move by dragging onto a folder,
// delete after a confirmation, upload (button or drop), download. Viewers only download.

import { ApiError, request } from "./api.js";
import { icon } from "./icons.js";
import { Uploads, droppedFiles } from "./files-upload.js";

function parentOf(path) {
  const cut = path.lastIndexOf("/");
  return cut < 0 ? "" : path.slice(0, cut);
}

function join(dir, name) {
  return dir ? `${dir}/${name}` : name;
}

// `name` is what assistive technology reads (within the entry, so without its path: the
// entry's own button keeps the path as its whole name); `title` says it in full on hover.
function button(label, name, className, title = name) {
  const b = document.createElement("button");
  b.type = "button";
  b.className = className;
  b.append(...[label].flat()); // text, or an icon and its text
  b.title = title;
  b.setAttribute("aria-label", name);
  return b;
}

export class FileActions {
  constructor(panel, browser, { projectId, canWrite, onError }) {
    this.browser = browser;
    this.projectId = projectId;
    this.canWrite = canWrite;
    this.onError = onError;
    const header = panel.querySelector(".files-header");
    const tools = document.createElement("div");
    tools.className = "file-tools";
    const all = document.createElement("a");
    all.className = "button download-all";
    all.href = this.downloadUrl("");
    all.append(icon("download"), " .zip");
    all.title = "Download the whole project as a .zip";
    all.setAttribute("aria-label", all.title);
    tools.append(all);
    const uploads = document.createElement("ul");
    uploads.className = "upload-list";
    uploads.hidden = true;
    panel.querySelector(".file-tree").before(uploads);
    this.uploads = new Uploads(uploads, projectId, { onDone: () => browser.refresh() });
    if (canWrite) {
      const newFile = button("+ File", "New file", "new-file");
      const newFolder = button("+ Folder", "New folder", "new-folder");
      const upload = button([icon("upload"), " Upload"], "Upload files", "upload-files");
      this.input = document.createElement("input");
      this.input.type = "file";
      this.input.multiple = true;
      this.input.hidden = true;
      this.input.className = "upload-input";
      newFile.addEventListener("click", () => this.newEntry("new", "New file name (a path, like docs/notes.md):"));
      newFolder.addEventListener("click", () => this.newEntry("folder", "New folder name:"));
      upload.addEventListener("click", () => this.input.click());
      this.input.addEventListener("change", () => {
        const items = [...this.input.files].map((file) => ({ file, path: file.name }));
        this.input.value = "";
        this.uploads.upload(items, "");
      });
      tools.prepend(newFile, newFolder, upload, this.input);
      this.dropTarget(browser.tree, () => "");
    }
    header.querySelector(".refresh-files").before(tools);
    browser.decorate = (li, entry, path) => this.decorate(li, entry, path);
  }

  downloadUrl(path) {
    return `/api/projects/${this.projectId}/files/download?path=${encodeURIComponent(path)}`;
  }

  /** Make the change; `done` runs once it is made, before any refresh can read the tree. */
  async post(action, json, done = () => {}) {
    try {
      await this.browser.changing(async () => {
        await request(`/api/projects/${this.projectId}/files/${action}`, { method: "POST", json });
        done();
      });
      return true;
    } catch (error) {
      this.onError(error instanceof ApiError ? error.message : "The change failed.");
      return false;
    } finally {
      await this.browser.refresh();
    }
  }

  async newEntry(action, question) {
    const path = window.prompt(question);
    if (!path) return;
    await this.post(action, action === "new" ? { path, text: "" } : { path });
    if (action === "new") await this.browser.openFile(path);
  }

  decorate(li, entry, path) {
    const actions = document.createElement("span");
    actions.className = "entry-actions";
    const download = document.createElement("a");
    download.className = "download";
    download.href = this.downloadUrl(path);
    download.append(icon("download"));
    download.title = entry.type === "directory" ? `Download ${path} as a .zip` : `Download ${path}`;
    download.setAttribute("aria-label", "Download");
    actions.append(download);
    if (this.canWrite) {
      const rename = button(icon("edit"), "Rename or move", "rename", `Rename or move ${path}`);
      const remove = button(icon("trash"), "Delete", "delete", `Delete ${path}`);
      rename.addEventListener("click", () => this.rename(path));
      remove.addEventListener("click", () => this.remove(path, entry.type));
      actions.append(rename, remove);
      li.draggable = true;
      li.addEventListener("dragstart", (event) => {
        event.stopPropagation();
        event.dataTransfer.setData("application/x-rojo-path", path);
        event.dataTransfer.effectAllowed = "move";
      });
      if (entry.type === "directory") this.dropTarget(li, () => path);
    }
    li.querySelector(".entry").after(actions);
  }

  async rename(path) {
    const destination = window.prompt(`Rename or move ${path} to:`, path);
    if (!destination || destination === path) return;
    // The open file (or one in the folder) is followed to its new place once it is there:
    // until then a refresh reads it where it is.
    await this.post("move", { source: path, destination }, () => {
      const open = this.browser.openPath;
      if (open === path || open?.startsWith(`${path}/`)) this.browser.openPath = destination + open.slice(path.length);
    });
  }

  async remove(path, type) {
    const what = type === "directory" ? `the folder ${path} and everything in it` : path;
    if (!window.confirm(`Delete ${what}? (It can be restored from Recently deleted, under the files.)`)) return;
    const open = this.browser.openPath;
    if (open === path || open?.startsWith(`${path}/`)) this.browser.closeFile();
    await this.post("delete", { path });
  }

  /** `element` takes drops: a tree entry dragged there moves, files from outside upload. */
  dropTarget(element, folderOf) {
    element.addEventListener("dragover", (event) => {
      event.preventDefault();
      event.stopPropagation();
      element.classList.add("drop-here");
    });
    element.addEventListener("dragleave", () => element.classList.remove("drop-here"));
    element.addEventListener("drop", async (event) => {
      event.preventDefault();
      event.stopPropagation();
      element.classList.remove("drop-here");
      const folder = folderOf();
      const moved = event.dataTransfer.getData("application/x-rojo-path");
      if (moved) {
        const name = moved.split("/").at(-1);
        if (parentOf(moved) !== folder && moved !== folder) {
          await this.post("move", { source: moved, destination: join(folder, name) });
        }
        return;
      }
      const items = await droppedFiles(event.dataTransfer);
      if (items.length) await this.uploads.upload(items, folder);
    });
  }
}
