// Previews in the file panel: Markdown through the chat's renderer, pictures as pictures, PDFs
// in the browser's viewer, and pages (HTML, .page) in a frame that can run nothing. Pictures,
// PDFs and pages come from the app's preview address (roject/previews/): a capability for
// this person and project, served under a policy of its own (a page: sandboxed, no script,
// an origin of its own, only the project's files beside it). The frame is sandboxed too, with
// no permission at all. A file's source is one click away; a change to it refreshes the preview.

import { getJson } from "./api.js";
import { renderMarkdown } from "./markdown.js";

const KINDS = {
  md: "markdown",
  markdown: "markdown",
  html: "page",
  htm: "page",
  page: "page",
  png: "image",
  jpg: "image",
  jpeg: "image",
  gif: "image",
  webp: "image",
  avif: "image",
  svg: "image",
  pdf: "pdf",
};

/** "markdown", "page", "image", "pdf", or null for a file shown as text. */
export function previewKind(path) {
  const name = path.split("/").pop();
  const dot = name.lastIndexOf(".");
  return dot > 0 ? (KINDS[name.slice(dot + 1).toLowerCase()] ?? null) : null;
}

/** Whether a file of this kind has no text to show (only its preview). */
export function binaryKind(kind) {
  return kind === "image" || kind === "pdf";
}

export class FilePreview {
  constructor(viewer, projectId) {
    this.projectId = projectId;
    this.content = viewer.querySelector(".file-content");
    this.element = document.createElement("div");
    this.element.className = "file-preview";
    this.element.hidden = true;
    this.content.after(this.element);
    this.toggle = document.createElement("button");
    this.toggle.type = "button";
    this.toggle.className = "preview-toggle";
    this.toggle.hidden = true;
    this.toggle.addEventListener("click", () => this.showSource(!this.element.hidden));
    viewer.querySelector(".close-file").before(this.toggle);
    this.shown = null; // {path, modifiedAt} of what the preview shows
  }

  /** Show `path`'s preview (`text` for Markdown; the others load from the preview address). */
  async show(path, kind, { text = null, modifiedAt = null } = {}) {
    if (!kind) return this.clear();
    const same = this.shown?.path === path;
    if (same && this.shown.modifiedAt === modifiedAt && modifiedAt !== null) return;
    if (kind === "markdown") {
      const body = document.createElement("div");
      body.className = "markdown";
      renderMarkdown(text ?? "", body);
      this.element.replaceChildren(body);
    } else {
      const preview = await getJson(
        `/api/projects/${this.projectId}/files/preview?path=${encodeURIComponent(path)}`,
      );
      this.element.replaceChildren(this.frame(kind, preview.url, path));
      modifiedAt ??= preview.modifiedAt;
    }
    this.shown = { path, modifiedAt };
    this.toggle.hidden = binaryKind(kind); // a picture or a PDF has no source to show
    if (!same) this.showSource(false);
    else this.element.hidden = !this.content.hidden;
  }

  frame(kind, url, path) {
    const name = path.split("/").pop();
    if (kind === "image") {
      const image = document.createElement("img");
      image.src = url;
      image.alt = `Preview of ${name}`;
      return image;
    }
    const frame = document.createElement("iframe");
    frame.src = url;
    frame.title = `Preview of ${name}`;
    frame.referrerPolicy = "no-referrer";
    // A page: no script, no form, no popup, an origin of its own. A PDF needs the browser's
    // viewer, which a sandboxed frame refuses: its address's own policy lets it load nothing.
    if (kind === "page") frame.setAttribute("sandbox", "");
    return frame;
  }

  /** The editor is open (the preview steps aside) or closed (the preview comes back). */
  editing(on) {
    if (!this.shown) return;
    this.toggle.hidden = on;
    if (on) this.element.hidden = true;
    else this.showSource(false);
  }

  showSource(source) {
    this.element.hidden = source;
    this.content.hidden = !source;
    this.toggle.textContent = source ? "Preview" : "Source";
    this.toggle.setAttribute("aria-pressed", String(source));
  }

  clear() {
    this.shown = null;
    this.element.hidden = true;
    this.element.replaceChildren();
    this.toggle.hidden = true;
    this.content.hidden = false;
  }
}
