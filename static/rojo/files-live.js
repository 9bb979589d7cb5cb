// The project's live stream: every recorded change to its files (anyone's) refreshes the tree,
// the open file and its history, without a reload. EventSource reconnects by itself; the
// panel's `status` says whether changes are followed right now.

export function filesLive(projectId, status, onFiles) {
  const source = new EventSource(`/api/projects/${projectId}/live`);
  const show = (state) => {
    status.dataset.state = state;
    status.textContent = state === "live" ? "● live" : "○ offline";
    status.title = state === "live"
      ? "Changes to the files, by anyone, show here as they happen"
      : "Not following changes right now (reconnecting); ↻ refreshes";
  };
  show("offline");
  source.addEventListener("ready", () => show("live"));
  source.addEventListener("error", () => show("offline"));
  let pending = null;
  let changes = [];
  source.addEventListener("files", (event) => {
    changes.push(JSON.parse(event.data));
    // A burst of changes (a rojo's turn, a folder upload) refreshes once.
    clearTimeout(pending);
    pending = setTimeout(() => {
      const batch = changes;
      changes = [];
      onFiles(batch);
    }, 150);
  });
  return source;
}
