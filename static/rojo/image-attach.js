// Images in the message box: pasted, dropped or picked with the Attach image button. Each
// is uploaded at once (POST /api/projects/{id}/images: the server checks its type by its
// bytes and its size) and shown as a thumbnail above the box; the message names them by
// their sha256. A thumbnail in a user's bubble is the image served back by the app.

import { csrfToken } from "./api.js";

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

export class ImageAttachments {
  /** `onError(message)` tells the person what was refused. */
  constructor(form, input, projectId, onError) {
    this.projectId = projectId;
    this.onError = onError;
    this.images = []; // {sha256, type, size}, in the order attached
    // One upload at a time: the server bounds a person's uploads under way (429 past that).
    this.queue = Promise.resolve();
    this.tray = document.createElement("div");
    this.tray.className = "image-thumbs image-tray";
    this.tray.hidden = true;
    input.before(this.tray);
    this.picker = document.createElement("input");
    this.picker.type = "file";
    this.picker.accept = TYPES.join(",");
    this.picker.multiple = true;
    this.picker.hidden = true;
    const button = document.createElement("button");
    button.type = "button";
    button.className = "attach-image";
    button.textContent = "Attach image";
    button.addEventListener("click", () => this.picker.click());
    this.picker.addEventListener("change", () => {
      this.add([...this.picker.files]);
      this.picker.value = "";
    });
    form.querySelector(".composer-actions")?.prepend(button, this.picker);
    input.addEventListener("paste", (event) => {
      const files = [...(event.clipboardData?.files ?? [])].filter((f) => f.type.startsWith("image/"));
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
    let response;
    try {
      response = await fetch(`/api/projects/${this.projectId}/images`, {
        method: "POST",
        headers: { "Content-Type": "application/octet-stream", "X-CSRFToken": csrfToken() },
        body: file,
        credentials: "same-origin",
      });
    } catch {
      return this.onError(`${file.name || "The image"} could not be uploaded: the server could not be reached.`);
    }
    const body = await response.json().catch(() => ({}));
    if (!response.ok) {
      return this.onError(`${file.name || "The image"} was not attached: ${body.detail ?? response.statusText}`);
    }
    if (!this.images.some((image) => image.sha256 === body.sha256)) this.images.push(body);
    this.show();
  }

  show() {
    this.tray.hidden = !this.images.length;
    this.tray.replaceChildren(
      ...this.images.map((image) => {
        const item = imageThumbs([imageUrl(this.projectId, image.sha256)]).firstChild;
        const remove = document.createElement("button");
        remove.type = "button";
        remove.textContent = "×";
        remove.setAttribute("aria-label", "Do not attach this image");
        remove.addEventListener("click", () => {
          this.images = this.images.filter((other) => other !== image);
          this.show();
        });
        const wrap = document.createElement("span");
        wrap.className = "image-tray-item";
        wrap.append(item, remove);
        return wrap;
      }),
    );
  }

  /** The images to send (their uploads finished first), taken out of the box. */
  async take() {
    await this.queue;
    const taken = this.images;
    this.images = [];
    this.show();
    return taken;
  }

  /** Put images back in the box (the message was not sent). */
  restore(images) {
    this.images = [...images, ...this.images];
    this.show();
  }
}
