// Keys of the chat panel that work wherever the focus is: Esc stops the reply that runs.

/** Whether an Esc is meant for something else: a field other than the message box (the
 * search clears, a rename or an edit is cancelled) or a dialog (it closes). */
function meantElsewhere(event, input) {
  const target = event.target;
  if (target === input) return false;
  return Boolean(target?.closest?.("input, textarea, select, [contenteditable], dialog"));
}

/** Esc presses the panel's Stop while it is shown (a reply runs) and enabled. */
export function escStops(panel) {
  const stop = panel.querySelector(".stop");
  const input = panel.querySelector("textarea");
  document.addEventListener("keydown", (event) => {
    if (event.key !== "Escape" || event.isComposing || stop.hidden || stop.disabled) return;
    if (meantElsewhere(event, input)) return;
    event.preventDefault();
    stop.click();
  });
}
