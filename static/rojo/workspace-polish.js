// The project page's conveniences, wired in one place: Esc stops a reply, the tab title
// follows the turn, an empty conversation suggests requests, the rojo bar folds on a phone,
// and the file tree marks what the latest turn changed.

import { getJson } from "./api.js";
import { escStops } from "./chat-keys.js";
import { emptyChatHint } from "./empty-chat.js";
import { rojoBarCollapse } from "./rojo-bar.js";
import { tabTitleFollow } from "./tab-title.js";

/** The paths the conversation's latest turn changed (and that were not undone since). */
export function latestTurnPaths({ messages, changes }) {
  let asked = -1;
  for (const message of messages) if (message.role === "user") asked = Math.max(asked, message.id);
  const paths = changes
    .filter((change) => !change.undone && change.message_id !== null && change.message_id > asked)
    .flatMap((change) => change.paths);
  return [...new Set(paths)];
}

/** Install them on the page; call `opened()` once a stored conversation is shown. */
export function workspacePolish({ panel, chat, files, config }) {
  escStops(panel);
  tabTitleFollow(panel);
  rojoBarCollapse(document.querySelector(".rojo-bar"));
  const hint = emptyChatHint(panel, { canWrite: config.canWrite, opening: config.conversation });
  const markLatest = async () => {
    if (!chat.conversationId) return;
    try {
      files.markChanged(latestTurnPaths(await getJson(`/api/conversations/${chat.conversationId}`)));
    } catch {
      // The marks are a help, not the record: the tree stays as it was.
    }
  };
  chat.addEventListener("turn-finished", markLatest);
  chat.addEventListener("files-changed", markLatest);
  return {
    opened() {
      hint.opened();
      markLatest();
    },
  };
}
