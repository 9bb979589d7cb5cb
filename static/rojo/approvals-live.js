// The header's count of calls waiting for this owner's approval, live over server-sent
// events (any process's news), and a browser notification when one more comes in, where
// the user has permitted it. Permission is asked only from the "Notify me" button.

const link = document.querySelector(".approvals-link");
const badge = link?.querySelector(".approvals-count");
const notifyButton = document.querySelector(".notify-enable");

function notify(count) {
  if (!("Notification" in window) || Notification.permission !== "granted") return;
  const body = count === 1 ? "A change waits for your approval." : `${count} changes wait for your approval.`;
  new Notification("Rojo Chat", { body, tag: "rojo-approvals" });
}

if (notifyButton && "Notification" in window && Notification.permission === "default") {
  notifyButton.hidden = false;
  notifyButton.addEventListener("click", async () => {
    await Notification.requestPermission();
    notifyButton.hidden = true;
  });
}

if (badge) {
  let shown = null;
  const source = new EventSource("/api/approvals/live");
  source.addEventListener("count", (event) => {
    const { count } = JSON.parse(event.data);
    badge.textContent = count ? String(count) : "";
    badge.dataset.count = String(count);
    link.classList.toggle("has-approvals", count > 0);
    if (shown !== null && count > shown) notify(count);
    shown = count;
    document.dispatchEvent(new CustomEvent("approvals-count", { detail: { count } }));
  });
  window.addEventListener("pagehide", () => source.close());
}
