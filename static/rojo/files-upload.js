// Uploads from the file panel: one request per file (XHR, for its upload progress), each with
// a progress bar. A taken name asks before replacing; a .zip asks whether to unpack it.

import { csrfToken } from "./api.js";
import { counted } from "./counted.js";
import { visible } from "./visible.js";

function join(dir, name) {
  return dir ? `${dir}/${name}` : name;
}

/** POST one file as the raw body; resolves {status, body}, reporting progress (0..1). */
function send(url, file, onProgress) {
  return new Promise((resolve) => {
    const xhr = new XMLHttpRequest();
    xhr.open("POST", url);
    xhr.setRequestHeader("X-CSRFToken", csrfToken());
    xhr.setRequestHeader("Content-Type", "application/octet-stream");
    xhr.upload.addEventListener("progress", (event) => {
      if (event.lengthComputable) onProgress(event.loaded / event.total);
    });
    xhr.addEventListener("load", () => {
      let body = {};
      try {
        body = JSON.parse(xhr.responseText);
      } catch {
        body = { detail: xhr.statusText };
      }
      resolve({ status: xhr.status, body });
    });
    xhr.addEventListener("error", () => resolve({ status: 0, body: { detail: "The upload failed." } }));
    xhr.send(file);
  });
}

/** The files of a drop, folders walked (their paths kept), as [{file, path}]. */
export async function droppedFiles(dataTransfer) {
  const entries = [...dataTransfer.items]
    .map((item) => item.webkitGetAsEntry?.())
    .filter(Boolean);
  if (!entries.length) return [...dataTransfer.files].map((file) => ({ file, path: file.name }));
  const found = [];
  async function walk(entry, prefix) {
    if (entry.isFile) {
      const file = await new Promise((ok, fail) => entry.file(ok, fail));
      found.push({ file, path: join(prefix, entry.name) });
    } else if (entry.isDirectory) {
      const reader = entry.createReader();
      let batch;
      do {
        batch = await new Promise((ok, fail) => reader.readEntries(ok, fail));
        for (const inner of batch) await walk(inner, join(prefix, entry.name));
      } while (batch.length);
    }
  }
  for (const entry of entries) await walk(entry, "");
  return found;
}

export class Uploads {
  constructor(list, projectId, { onDone }) {
    this.list = list;
    this.projectId = projectId;
    this.onDone = onDone;
  }

  url(path, { overwrite = false, unpack = false } = {}) {
    const query = new URLSearchParams({ path, overwrite: String(overwrite), unpack: String(unpack) });
    return `/api/projects/${this.projectId}/files/upload?${query}`;
  }

  /** Upload [{file, path}] into the folder `dir`, one after the other. */
  async upload(items, dir) {
    for (const { file, path } of items) await this.one(file, join(dir, path));
    this.onDone();
  }

  row(path) {
    const li = document.createElement("li");
    const name = document.createElement("span");
    name.className = "upload-name";
    name.append(...visible(path));
    const bar = document.createElement("progress");
    bar.max = 1;
    bar.value = 0;
    const status = document.createElement("span");
    status.className = "upload-status";
    li.append(name, bar, status);
    this.list.hidden = false;
    this.list.append(li);
    return { li, bar, status };
  }

  async one(file, path) {
    let target = path;
    let unpack = false;
    if (/\.zip$/i.test(path) && window.confirm(`Unpack ${path} into a folder ${path.slice(0, -4)}?`)) {
      target = path.slice(0, -4);
      unpack = true;
    }
    const row = this.row(target);
    let answer = await send(this.url(target, { unpack }), file, (share) => (row.bar.value = share));
    if (answer.status === 409 && window.confirm(`${target} exists already. Replace it?`)) {
      row.bar.value = 0;
      answer = await send(this.url(target, { unpack, overwrite: true }), file, (share) => (row.bar.value = share));
    }
    row.bar.value = 1;
    const ok = answer.status === 200;
    row.li.classList.add(ok ? "done" : "failed");
    let text = ok ? "uploaded" : answer.body.detail || `failed (${answer.status})`;
    if (ok && unpack) {
      text = `${counted(answer.body.extracted.length, "file")} unpacked`;
      if (answer.body.skipped.length) {
        text += `; skipped: ${answer.body.skipped.map((s) => `${s.name} (${s.reason})`).join(", ")}`;
      }
    }
    row.status.replaceChildren(...visible(text));
  }
}
