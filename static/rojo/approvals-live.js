// The header's count of calls waiting for this owner's approval, live over server-sent
// events (any process's news), and a browser notification when one more comes in, where
// the user has permitted it. Permission is asked only from the "Notify me" button.

import { agreeing, counted } from "./counted.js";
import { backoffDelay } from "./reconnect.js";

const link = document.querySelector(".approvals-link");
const badge = link?.querySelector(".approvals-count");
const notifyButton = document.querySelector(".notify-enable");

function notify(count) {
  if (!("Notification" in window) || Notification.permission !== "granted") return;
  const changes = count === 1 ? "A change" : counted(count, "change"); // "A", as one says it
  const body = `${changes} ${agreeing(count, "waits", "wait")} for your approval.`;
  new Notification("Rojo Chat", { body, tag: "rojo-approvals" });
}

// What the browser answered, in the button's place.
function notifyNote(answer) {
  const note = document.createElement("span");
  note.className = "notify-note";
  note.textContent = answer === "granted" ? "Notifications on" : "Notifications blocked";
  if (answer !== "granted") note.title = "Allow notifications for this site in the browser's site settings.";
  notifyButton.replaceWith(note);
  return note;
}

if (notifyButton && "Notification" in window && Notification.permission === "default") {
  notifyButton.hidden = false;
  notifyButton.addEventListener("click", async () => {
    const answer = await Notification.requestPermission();
    if (answer === "default") return; // the prompt was dismissed: the offer stays
    // Focused, and said: hiding the button alone left no word of a refusal and dropped the
    // focus to the page's start.
    const note = notifyNote(answer);
    note.setAttribute("role", "status");
    note.tabIndex = -1;
    note.focus();
  });
} else if (notifyButton && "Notification" in window && Notification.permission === "denied") {
  // Refused before: said on every page, or an owner would wait for notifications that the
  // browser never shows, with nothing saying why.
  notifyNote("denied");
}

// While the server cannot reach its relay the stream sends ERROR (code `unavailable`, a
// `retry` hint) and ends; a stream the browser gave up on ends too. Either way the page
// connects again after a growing delay (reconnect.js) and shows the count once it is back.
function follow(onCount) {
  let source = null;
  let attempts = 0;
  let timer = null;

  function again(hintSeconds, message = "The live count lost its connection. Reconnecting…") {
    source?.close();
    link.dataset.live = "reconnecting";
    link.title = message; // the count shown may be out of date meanwhile
    if (timer !== null) return;
    timer = setTimeout(() => {
      timer = null;
      open();
    }, backoffDelay(attempts++, hintSeconds));
  }

  function open() {
    source = new EventSource("/api/approvals/live");
    source.addEventListener("count", (event) => {
      attempts = 0;
      link.dataset.live = "connected";
      link.removeAttribute("title");
      onCount(JSON.parse(event.data).count);
    });
    source.addEventListener("ERROR", (event) => {
      const { code, retry, message } = JSON.parse(event.data);
      if (code === "unavailable") again(retry ?? 1, message);
    });
    source.addEventListener("error", () => {
      if (source.readyState === EventSource.CLOSED) again(0);
    });
  }

  open();
  window.addEventListener("pagehide", () => {
    clearTimeout(timer);
    source?.close();
  });
}

if (badge) {
  let shown = null;
  follow((count) => {
    badge.textContent = count ? String(count) : "";
    badge.dataset.count = String(count);
    link.classList.toggle("has-approvals", count > 0);
    if (shown !== null && count > shown) notify(count);
    shown = count;
    document.dispatchEvent(new CustomEvent("approvals-count", { detail: { count } }));
  });
}
