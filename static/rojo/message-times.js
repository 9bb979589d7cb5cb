// When each message was sent, shown when the pointer is on it. The time is written into the
// bubble only then, so the log's markup is the same live and reopened (and stays still while
// text is compared).

const SHORT = { hour: "2-digit", minute: "2-digit" };
const FULL = { dateStyle: "medium", timeStyle: "short" };

/** The bubble's message was sent at `at` (now, for a live one). */
export function stampTime(bubble, at = new Date()) {
  bubble.sentAt = at;
}

/** Each turn's times from stored messages: its user message id -> {asked, replied}. */
export function turnTimes(messages) {
  const times = new Map();
  let turn = null;
  for (const message of messages) {
    if (message.role === "user") {
      turn = { asked: new Date(message.created), replied: null };
      times.set(message.id, turn);
    } else if (turn && message.role === "assistant" && message.content && !turn.replied) {
      turn.replied = new Date(message.created);
    }
  }
  return times;
}

/** The bubble's tooltip: its full date once shown, then any details others gave it (a reply's
 * usage), so neither writer replaces the other's line. */
export function bubbleTitle(bubble) {
  const lines = [];
  if (bubble.dataset.time && bubble.sentAt) lines.push(bubble.sentAt.toLocaleString(undefined, FULL));
  if (bubble.details) lines.push(bubble.details);
  if (lines.length) bubble.title = lines.join("\n");
  else bubble.removeAttribute("title");
}

/** Pointing at a message in `log` shows its time (a small label, and the full date on hover). */
export function showTimesOnHover(log) {
  log.addEventListener("pointerover", (event) => {
    const bubble = event.target.closest?.(".bubble");
    if (!bubble?.sentAt || bubble.dataset.time) return;
    bubble.dataset.time = bubble.sentAt.toLocaleTimeString(undefined, SHORT);
    bubbleTitle(bubble);
  });
}
