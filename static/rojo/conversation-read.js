// The read-only page of a conversation (what "Copy link" copies): the chat panel's log, fed
// by the same handler as the chat, live when a reply runs, with nothing that sends, stops,
// approves, undoes, branches, renames or deletes. The API checks access again on each read.

import { ChatPanel } from "./chat.js";

const config = JSON.parse(document.getElementById("rojo-config").textContent);
const chat = new ChatPanel(document.querySelector("rojo-chat-panel"), {
  projectId: config.project.id,
  conversationId: config.conversation,
  rojoId: null,
  writingTools: [],
  canWrite: false, // no Undo, no Approve or Deny: a reader only watches
});
chat.open(config.conversation).catch((error) => chat.addError(error.message));
