// Keys of the chat panel that work wherever the focus is: Esc stops the reply that runs.

/** Esc presses the panel's Stop while it is shown (a reply runs) and enabled. */
export function escStops(panel) {
  const stop = panel.querySelector(".stop");
  document.addEventListener("keydown", (event) => {
    if (event.key !== "Escape" || event.isComposing || stop.hidden || stop.disabled) return;
    event.preventDefault();
    stop.click();
  });
}
