// A PDF attached in the message box, as a chip: its name and page count, a link that
// downloads it (GET /api/projects/{id}/pdfs/{sha256}?name=: members only, served as a
// download, never as a page of the app). The same chip shows in the box and in the bubble.

import { counted } from "./counted.js";
import { icon } from "./icons.js";
import { visible } from "./visible.js";

export const PDF_TYPE = "application/pdf";

/** Whether a dropped, pasted or picked file goes as a PDF (by its type or its name; the
 * server checks its bytes). */
export function isPdf(file) {
  return file.type === PDF_TYPE || /\.pdf$/i.test(file.name ?? "");
}

export function pdfUrl(projectId, pdf) {
  return `/api/projects/${projectId}/pdfs/${pdf.sha256}?name=${encodeURIComponent(pdf.name)}`;
}

/** The chip of one PDF (`pdf`: {sha256, name, pages}). */
export function pdfChip(projectId, pdf) {
  const link = document.createElement("a");
  link.className = "attachment-chip pdf-chip";
  link.href = pdfUrl(projectId, pdf);
  link.download = pdf.name;
  const pages = counted(pdf.pages, "page");
  link.title = `Attached PDF: ${pdf.name}, ${pages} (download)`;
  const count = document.createElement("span");
  count.className = "pdf-pages";
  count.textContent = ` · ${pages}`;
  link.append(icon("document"), " ", ...visible(pdf.name), count);
  return link;
}
