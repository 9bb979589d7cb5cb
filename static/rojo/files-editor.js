// The text editor of the file panel: CodeMirror 6 (vendored, loaded on first use), with
// highlighting by file type and Save. A save names the version the editor loaded; when
// someone saved the file since, the server answers 409 with the file as it is now and the
// editor shows both in CodeMirror's merge view, in a wide dialog: the file now on the left,
// yours on the right.

import { ApiError, getJson, request } from "./api.js";
import { MergeDialog } from "./files-merge.js";
import { visibleText } from "./visible.js";

let codemirror = null;
async function loadCodemirror() {
  codemirror ??= await import("../vendor/codemirror/codemirror.js");
  return codemirror;
}

function language(cm, path) {
  const extension = path.split(".").at(-1).toLowerCase();
  const modes = {
    md: () => cm.markdown(),
    markdown: () => cm.markdown(),
    py: () => cm.python(),
    js: () => cm.javascript(),
    mjs: () => cm.javascript(),
    ts: () => cm.javascript({ typescript: true }),
    jsx: () => cm.javascript({ jsx: true }),
    html: () => cm.html(),
    htm: () => cm.html(),
    css: () => cm.css(),
    json: () => cm.json(),
  };
  return modes[extension] ? [modes[extension]()] : [];
}

function button(label, className) {
  const b = document.createElement("button");
  b.type = "button";
  b.className = className;
  b.textContent = label;
  b.hidden = true;
  return b;
}

export class FileEditor {
  constructor(viewer, browser, { projectId, canWrite, onError }) {
    this.viewer = viewer;
    this.browser = browser;
    this.projectId = projectId;
    this.canWrite = canWrite;
    this.onError = onError;
    this.file = null;
    this.view = null;
    this.merge = null;
    this.ownChanges = new Set();
    this.content = viewer.querySelector(".file-content");
    this.area = document.createElement("div");
    this.area.className = "file-editor";
    this.area.hidden = true;
    this.note = document.createElement("p");
    this.note.className = "file-editor-note";
    this.note.setAttribute("role", "status");
    this.note.hidden = true;
    this.content.after(this.note, this.area);
    this.editButton = button("Edit", "edit-file");
    this.saveButton = button("Save", "primary save-file");
    this.doneButton = button("Close editor", "close-editor");
    viewer.querySelector(".close-file").before(this.editButton, this.saveButton, this.doneButton);
    this.editButton.addEventListener("click", () => this.edit());
    this.saveButton.addEventListener("click", () => this.save());
    this.doneButton.addEventListener("click", () => this.stop({ reload: true }));
    this.mergeDialog = new MergeDialog({ onDismiss: () => this.leaveMerge() });
    this.area.addEventListener("keydown", (event) => {
      if ((event.ctrlKey || event.metaKey) && event.key === "s") {
        event.preventDefault();
        this.save();
      }
    });
  }

  get editing() {
    return this.view !== null;
  }

  /** The browser opened a file (or none): offer Edit; an editor of another file closes. */
  opened(file) {
    if (this.editing && file?.path !== this.file?.path) this.stop();
    if (!this.editing) this.file = file;
    this.editButton.hidden = !(this.canWrite && file && !this.editing);
  }

  say(text) {
    this.note.hidden = !text;
    this.note.textContent = text ? visibleText(text) : "";
  }

  async edit() {
    if (!this.file) return;
    const cm = await loadCodemirror();
    this.stop();
    this.view = new cm.EditorView({
      doc: this.file.text,
      extensions: [cm.basicSetup, ...language(cm, this.file.path)],
      parent: this.area,
    });
    this.showEditing(true);
    this.view.focus();
  }

  showEditing(on) {
    this.browser.editing = on;
    this.area.hidden = !on;
    this.content.hidden = on;
    this.editButton.hidden = on || !this.canWrite;
    this.saveButton.hidden = !on;
    this.doneButton.hidden = !on;
    this.browser.preview?.editing(on);
  }

  stop({ reload = false } = {}) {
    this.mergeDialog.giveBack();
    this.merge?.destroy();
    this.view?.destroy();
    this.merge = null;
    this.view = null;
    this.area.replaceChildren();
    this.area.classList.remove("merging");
    this.say("");
    this.showEditing(false);
    if (reload && this.browser.openPath !== null) this.browser.openFile(this.browser.openPath);
  }

  async save() {
    const text = this.view.state.doc.toString();
    const path = this.file.path;
    try {
      const response = await request(`/api/projects/${this.projectId}/files/save`, {
        method: "POST",
        json: { path, text, base: this.file.version },
      });
      const saved = await response.json();
      if (saved.change) this.ownChanges.add(saved.change);
      const fresh = await getJson(`/api/projects/${this.projectId}/files/content?path=${encodeURIComponent(path)}`);
      this.file = fresh;
      if (this.browser.openPath === path) this.browser.showMeta(fresh);
      if (this.merge) await this.edit();  // back to one editor, on the saved text
      this.say("Saved.");
    } catch (error) {
      if (error instanceof ApiError && error.status === 409 && error.body.current) {
        await this.showMerge(error.body, text);
      } else {
        this.onError(error instanceof ApiError ? error.message : "Could not save the file.");
      }
    }
  }

  /** Both versions side by side: the file now (read-only) and yours, to merge into. */
  async showMerge(conflict, mine) {
    const cm = await loadCodemirror();
    const modes = language(cm, this.file.path);
    this.view?.destroy();
    this.merge?.destroy();
    this.area.replaceChildren();
    this.merge = new cm.MergeView({
      a: {
        doc: conflict.currentText ?? "",
        extensions: [cm.basicSetup, ...modes, cm.EditorState.readOnly.of(true), cm.EditorView.editable.of(false)],
      },
      b: { doc: mine, extensions: [cm.basicSetup, ...modes] },
      parent: this.area,
    });
    this.area.classList.add("merging");
    this.mergeDialog.show([this.note, this.area], [this.saveButton, this.doneButton]);
    this.view = this.merge.b;
    // The next save is made over the version now, with what the right side holds.
    this.file = { ...this.file, text: conflict.currentText ?? "", version: conflict.current };
    this.say(
      `${this.file.path} changed since you opened it. Left: the file now; right: your text. `
        + "Merge into the right side, then Save.",
    );
  }

  /** Escape closed the merge dialog: one editor again, in the panel, still holding the right
   * side's text (nothing typed is lost); Save writes it over the file as it is now. */
  async leaveMerge() {
    if (!this.merge) return;
    const mine = this.view.state.doc.toString();
    const cm = await loadCodemirror();
    this.mergeDialog.giveBack();
    this.merge.destroy();
    this.merge = null;
    this.area.replaceChildren();
    this.area.classList.remove("merging");
    this.view = new cm.EditorView({
      doc: mine,
      extensions: [cm.basicSetup, ...language(cm, this.file.path)],
      parent: this.area,
    });
    this.say(`Your text is kept; Save writes it over ${this.file.path} as it is now.`);
    this.view.focus();
  }

  get dirty() {
    return this.editing && this.view.state.doc.toString() !== this.file.text;
  }

  /** A recorded change reached the page. An editor of that file with nothing unsaved takes
   * the new text; one with unsaved work keeps it and says so (Save then merges). */
  async changed(changes) {
    if (!this.editing || !this.file || this.merge) return;
    const path = this.file.path;
    const other = changes.find((c) => !this.ownChanges.has(c.change) && c.paths.some((p) => p === path || path.startsWith(`${p}/`)));
    if (!other) return;
    const who = other.author ? ` by ${other.author}` : "";
    if (this.dirty) {
      this.say(`${path} was changed${who} (${other.origin}) since you opened it; Save will show both versions to merge.`);
      return;
    }
    try {
      this.file = await getJson(`/api/projects/${this.projectId}/files/content?path=${encodeURIComponent(path)}`);
    } catch {
      this.say(`${path} was changed${who} and cannot be opened now.`);
      return;
    }
    const doc = this.view.state.doc;
    this.view.dispatch({ changes: { from: 0, to: doc.length, insert: this.file.text } });
    this.say(`Updated: ${path} was changed${who} (${other.origin}).`);
  }
}
