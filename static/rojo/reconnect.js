// Re-attaching to a running reply after its stream broke, or while the server cannot reach
// its relay: tries again after a growing delay (1 s, 2 s, 4 s … at most 30 s, or the
// server's own hint if longer), with "Reconnecting…" shown in place of "Working…".

const FIRST_MS = 1000;
const MOST_MS = 30000;

/** The delay before try number `attempts` + 1, in ms: doubling from 1 s, capped at 30 s, or
 * the server's hint (seconds) if longer. The approvals count reconnects by it too. */
export function backoffDelay(attempts, hintSeconds = 0) {
  const backoff = Math.min(FIRST_MS * 2 ** attempts, MOST_MS);
  return Math.max(backoff, Math.min(hintSeconds * 1000, MOST_MS));
}

export class Reconnector {
  /** `note`: the element whose text says what the panel is doing (the busy note). */
  constructor(note) {
    this.note = note;
    this.label = note.lastChild; // the text node after the spinner
    this.working = this.label.textContent;
    this.attempts = 0;
  }

  /** The delay before the next try, in ms: doubling from 1 s, capped at 30 s. */
  nextDelay(hintSeconds = 0) {
    return backoffDelay(this.attempts++, hintSeconds);
  }

  /** Show "Reconnecting…" and wait before the next try. */
  async wait(hintSeconds = 0) {
    const delay = this.nextDelay(hintSeconds);
    this.label.textContent = ` Reconnecting… (next try in ${Math.round(delay / 1000)} s)`;
    this.note.classList.add("reconnecting");
    await new Promise((resolve) => setTimeout(resolve, delay));
  }

  /** Connected again (an event came): back to "Working…" and the shortest delay. */
  connected() {
    if (!this.attempts) return;
    this.attempts = 0;
    this.label.textContent = this.working;
    this.note.classList.remove("reconnecting");
  }
}
