// Each message sent carries a key the page makes, kept in the tab's sessionStorage until an
// answer comes. If none does (the server died after storing the message, before the reply
// started), the page finds the conversation its message went to by that key: at once, or
// when the page is reloaded.

import { getJson } from "./api.js";

const storageKey = (projectId) => `rojo-chat:sent:${projectId}`;

/** A new key for the message about to be sent, remembered until an answer comes. */
export function sentKeyMake(projectId) {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  const key = Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
  sessionStorage.setItem(storageKey(projectId), key);
  return key;
}

/** An answer came (or the key was looked up): nothing left to find. */
export function sentKeyForget(projectId) {
  sessionStorage.removeItem(storageKey(projectId));
}

/** The key of a message sent from this tab that got no answer, if any. */
export function sentKeyPending(projectId) {
  return sessionStorage.getItem(storageKey(projectId));
}

/** The id of the conversation the message sent with `key` is in: null when it was never
 * stored (the key is forgotten then too), undefined when the server cannot say now. */
export async function sentConversation(projectId, key) {
  let found;
  try {
    found = await getJson(`/api/projects/${projectId}/conversations?key=${encodeURIComponent(key)}`);
  } catch {
    return undefined;
  }
  sentKeyForget(projectId);
  return found[0]?.id ?? null;
}
