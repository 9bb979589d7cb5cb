// Where the messages queued while a reply runs are kept: this browser's localStorage, one list
// per person, project and conversation, so they survive a reload and stay with their
// conversation when the user goes to another one. A new conversation's list is kept under
// "new" until its id comes (with the reply's START). Kept in the browser, not on the server: a
// queued message is a draft the person may still edit or drop, and nothing of it is sent
// before the reply ends. A browser may be shared: whoever signs in after someone never sees,
// or sends as their own, what that person queued.

const PREFIX = "rojo-chat:queue";

/** The storage key of `person`'s queue in a conversation (`conversationId` null: a new
 * conversation). */
export function queueKey(person, projectId, conversationId) {
  return `${PREFIX}:${encodeURIComponent(person)}:${projectId}:${conversationId ?? "new"}`;
}

/** The queued messages under `key`, oldest first: each `{ id, text, attachments }`. */
export function queueRead(key) {
  try {
    const items = JSON.parse(localStorage.getItem(key) ?? "[]");
    if (!Array.isArray(items)) return [];
    return items
      .filter((item) => typeof item?.text === "string" && typeof item.id === "string")
      .map((item) => ({ ...item, attachments: Array.isArray(item.attachments) ? item.attachments : [] }));
  } catch {
    return []; // written by something else, or cut: nothing usable queued
  }
}

/** Keep `items` under `key` (none: the key goes). */
export function queueWrite(key, items) {
  if (items.length) localStorage.setItem(key, JSON.stringify(items));
  else localStorage.removeItem(key);
}

/** A new queued message. */
export function queueItem(text, attachments) {
  const bytes = crypto.getRandomValues(new Uint8Array(8));
  const id = Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
  return { id, text, attachments: [...attachments] };
}

/** Take the oldest message off the queue under `key`, read afresh (another tab may have
 * changed it), so it is sent once. */
export function queueTakeFirst(key) {
  const [first, ...rest] = queueRead(key);
  queueWrite(key, rest);
  return first ?? null;
}

/** Move what a new conversation queued (under "new") to the id it got. */
export function queueMove(fromKey, toKey) {
  if (fromKey === toKey) return;
  const moved = queueRead(fromKey);
  if (!moved.length) return;
  queueWrite(toKey, [...queueRead(toKey), ...moved]);
  queueWrite(fromKey, []);
}
