// The project's live stream: every recorded change to its files (anyone's) refreshes the tree,
// the open file and its history, without a reload. EventSource reconnects by itself.

export function filesLive(projectId, onFiles) {
  const source = new EventSource(`/api/projects/${projectId}/live`);
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
