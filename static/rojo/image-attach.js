// Images and PDFs in the message box: pasted, dropped or picked with the Attach button. Each
// is uploaded at once (POST /api/projects/{id}/images or /pdfs: the server checks its type by
// its bytes and its size, and that a PDF's reader opens it) and shown above the box, an image
// as a thumbnail, a PDF as a chip with its name and pages; the message names them by their
// sha256. A thumbnail in a user's bubble is the image served back by the app.

import { csrfToken } from "./api.js";
import { PDF_TYPE, isPdf, pdfChip } from "./pdf-chip.js";

const TYPES = ["image/png", "image/jpeg", "image/webp", "image/gif"];

export function imageUrl(projectId, sha256) {
  return `/api/projects/${projectId}/images/${sha256}`;
}

/** Thumbnails of a message's images (`urls`), each a link to the image whole. */
export function imageThumbs(urls) {
  const thumbs = document.createElement("div");
  thumbs.className = "image-thumbs";
  for (const url of urls) {
    const link = document.createElement("a");
    link.href = url;
    link.target = "_blank";
    link.rel = "noopener";
    const img = document.createElement("img");
    img.src = url;
    img.alt = "Attached image";
    img.className = "image-thumb";
    link.append(img);
    thumbs.append(link);
  }
  return thumbs;
}

/** Whether the image at `url` can be drawn: bytes that begin like an image may be cut or
 * broken, and a model given them fails the message after it was sent. */
async function decodes(url) {
  const img = new Image();
  img.src = url;
  try {
    await img.decode();
    return true;
  } catch {
    return false;
  }
}

export class ImageAttachments {
  /** `onError(message)` tells the person what was refused. */
  constructor(form, input, projectId, onError) {
    this.projectId = projectId;
    this.onError = onError;
    this.images = []; // {sha256, type, size}, in the order attached
    this.pdfs = []; // {sha256, type, name, size, pages}, in the order attached
    // One upload at a time: the server bounds a person's uploads under way (429 past that).
    this.queue = Promise.resolve();
    this.tray = document.createElement("div");
    this.tray.className = "image-thumbs image-tray";
    this.tray.hidden = true;
    input.before(this.tray);
    this.picker = document.createElement("input");
    this.picker.type = "file";
    this.picker.accept = [...TYPES, PDF_TYPE, ".pdf"].join(",");
    this.picker.multiple = true;
    this.picker.hidden = true;
    const button = document.createElement("button");
    button.type = "button";
    button.className = "attach-image";
    button.textContent = "Attach image or PDF";
    button.addEventListener("click", () => this.picker.click());
    this.picker.addEventListener("change", () => {
      this.add([...this.picker.files]);
      this.picker.value = "";
    });
    form.querySelector(".composer-actions")?.prepend(button, this.picker);
    input.addEventListener("paste", (event) => {
      const files = [...(event.clipboardData?.files ?? [])].filter(
        (f) => f.type.startsWith("image/") || isPdf(f),
      );
      if (!files.length) return;
      event.preventDefault();
      this.add(files);
    });
    form.addEventListener("dragover", (event) => {
      if ([...(event.dataTransfer?.types ?? [])].includes("Files")) event.preventDefault();
    });
    form.addEventListener("drop", (event) => {
      const files = [...(event.dataTransfer?.files ?? [])];
      if (!files.length) return;
      event.preventDefault();
      this.add(files);
    });
  }

  add(files) {
    for (const file of files) this.queue = this.queue.then(() => this.upload(file));
  }

  async upload(file) {
    const pdf = isPdf(file);
    const what = file.name || (pdf ? "The PDF" : "The image");
    const url = pdf
      ? `/api/projects/${this.projectId}/pdfs?name=${encodeURIComponent(file.name || "document.pdf")}`
      : `/api/projects/${this.projectId}/images`;
    let response;
    try {
      response = await fetch(url, {
        method: "POST",
        headers: { "Content-Type": "application/octet-stream", "X-CSRFToken": csrfToken() },
        body: file,
        credentials: "same-origin",
      });
    } catch {
      return this.onError(`${what} could not be uploaded: the server could not be reached.`);
    }
    const body = await response.json().catch(() => ({}));
    if (!response.ok) {
      return this.onError(`${what} was not attached: ${body.detail ?? response.statusText}`);
    }
    if (!pdf && !(await decodes(imageUrl(this.projectId, body.sha256)))) {
      return this.onError(`${what} was not attached: it begins like an image but cannot be read as one`);
    }
    const list = pdf ? this.pdfs : this.images;
    if (!list.some((kept) => kept.sha256 === body.sha256)) list.push(body);
    this.show();
  }

  show() {
    this.tray.hidden = !this.images.length && !this.pdfs.length;
    const images = this.images.map((image) =>
      this.removable(imageThumbs([imageUrl(this.projectId, image.sha256)]).firstChild, image, "image"),
    );
    const pdfs = this.pdfs.map((pdf) => this.removable(pdfChip(this.projectId, pdf), pdf, "PDF"));
    this.tray.replaceChildren(...images, ...pdfs);
  }

  /** `item` in the tray, with a button that takes `kept` (an image or a PDF) out. */
  removable(item, kept, what) {
    const remove = document.createElement("button");
    remove.type = "button";
    remove.textContent = "×";
    remove.setAttribute("aria-label", `Do not attach this ${what}`);
    remove.addEventListener("click", () => {
      this.images = this.images.filter((other) => other !== kept);
      this.pdfs = this.pdfs.filter((other) => other !== kept);
      this.show();
    });
    const wrap = document.createElement("span");
    wrap.className = "image-tray-item";
    wrap.append(item, remove);
    return wrap;
  }

  /** The images and PDFs to send (their uploads finished first), taken out of the box. */
  async take() {
    await this.queue;
    const taken = { images: this.images, pdfs: this.pdfs };
    this.images = [];
    this.pdfs = [];
    this.show();
    return taken;
  }

  /** Put images and PDFs back in the box (the message was not sent). */
  restore({ images = [], pdfs = [] }) {
    this.images = [...images, ...this.images];
    this.pdfs = [...pdfs, ...this.pdfs];
    this.show();
  }
}
