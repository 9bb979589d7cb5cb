// "Copy link" in the chat header: copies the conversation's read-only address (and shows it,
// for a browser that may not write to the clipboard). Every member of the project may open
// it; anyone else gets a 404 there, as for a conversation that does not exist.

import { copyText } from "./copy.js";

/** The header's share control for project `projectId`; `show(id)` points it at a conversation. */
export function shareLink(element, projectId) {
  const button = element.querySelector(".copy-link");
  const shown = element.querySelector(".shared-url");
  let url = "";
  button.addEventListener("click", async () => {
    const done = await copyText(url);
    shown.href = url;
    shown.textContent = url;
    button.textContent = done ? "Link copied" : "Copy the link below";
    clearTimeout(button.reset);
    button.reset = setTimeout(() => (button.textContent = "Copy link"), 2000);
  });
  return {
    show(id) {
      element.hidden = !id;
      url = id ? new URL(`/projects/${projectId}/c/${id}/read/`, location.origin).href : "";
      shown.removeAttribute("href"); // until copied: the link of the conversation shown now
      shown.replaceChildren();
    },
  };
}
