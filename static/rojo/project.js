// The project page: wires the rojo picker, the chat panel, the conversation list and the files.

import { Branches } from "./branches.js";
import { ChatPanel } from "./chat.js";
import { ConversationList, messageReveal } from "./conversations.js";
import { FileBrowser } from "./files.js";
import { ModelPicker } from "./model-picker.js";
import { MessageQueue } from "./queue.js";
import { sentKeyForget, sentKeyPending } from "./sent-keys.js";
import { shareLink } from "./share-link.js";
import { filePanelExtras } from "./files-panel.js";
import { visibleText } from "./visible.js";
import { workspacePolish } from "./workspace-polish.js";
import { contextText, usageText } from "./render.js";

const config = JSON.parse(document.getElementById("rojo-config").textContent);
const workspace = document.querySelector(".workspace");
const picker = document.getElementById("rojo-picker");
const toolList = document.querySelector(".rojo-tools");
const storageKey = `rojo-chat:rojo:${config.project.id}`;

function showTools(rojo) {
  const names = (rojo?.tools ?? [])
    .filter((tool) => config.canWrite || !tool.writes)
    .map((tool) => tool.name);
  const servers = rojo?.mcpServers ?? [];
  const mcp = servers.length ? ` · MCP servers: ${visibleText(servers.join(", "))}` : "";
  toolList.textContent = (names.length ? `Tools: ${visibleText(names.join(", "))}` : "No tools") + mcp;
}

// What Python's str.split() splits at (JavaScript's \s differs: it has U+FEFF, not U+001C-1F).
const PYTHON_SPACE = /[\t-\r\x1C-\x20\x85\xA0\u1680\u2000-\u200A\u2028\u2029\u202F\u205F\u3000]+/u;

/** The title the server gives a new conversation (Conversation.title_from), so a reload matches. */
function conversationTitle(message) {
  const line = [...message.split(PYTHON_SPACE).filter(Boolean).join(" ")]; // code points, as Python counts
  return line.length <= 80 ? line.join("") : `${line.slice(0, 79).join("")}…`;
}

for (const rojo of config.rojos) {
  const option = document.createElement("option");
  option.value = String(rojo.id);
  option.textContent = visibleText(`${rojo.name} · ${rojo.model}`);
  picker.append(option);
}
const remembered = Number(localStorage.getItem(storageKey));
const initial =
  config.rojos.find((r) => r.id === config.rojo) ??
  config.rojos.find((r) => r.id === remembered) ??
  config.rojos[0];
if (initial) picker.value = String(initial.id);
else {
  const option = document.createElement("option");
  option.textContent = "No rojos yet: an administrator adds them in the admin";
  picker.append(option);
  picker.disabled = true;
}
showTools(initial);

const files = new FileBrowser(document.querySelector(".files"), config.project.id);
filePanelExtras(document.querySelector(".files"), files, {
  projectId: config.project.id,
  canWrite: config.canWrite,
  onError: (message) => window.alert(message),
});
const chat = new ChatPanel(document.querySelector("rojo-chat-panel"), {
  projectId: config.project.id,
  conversationId: config.conversation,
  rojoId: initial?.id ?? null,
  writingTools: config.writingTools,
  canWrite: config.canWrite,
  isOwner: config.role === "owner",
  username: config.username,
});

new MessageQueue(chat, { projectId: config.project.id, person: config.username });

const models = new ModelPicker(document.querySelector(".model-choice"), {
  chat,
  rojos: config.rojos,
  canPick: !(config.mcpConversation || config.othersConversation),
});
models.show(initial, initial && initial.id === config.rojo ? config.model : "");

// An outside agent's MCP calls are shown with their Undo, but not chatted on.
document.querySelector(".composer").hidden = Boolean(config.mcpConversation || config.othersConversation);

const exportLinks = document.querySelector(".export-links");
function showExport(id) {
  exportLinks.hidden = !id;
  if (!id) return;
  exportLinks.querySelector(".export-json").href = `/api/conversations/${id}/export?format=json`;
  exportLinks.querySelector(".export-md").href = `/api/conversations/${id}/export?format=markdown`;
}
showExport(config.conversation);
const share = shareLink(document.querySelector(".share-link"), config.project.id);
share.show(config.conversation);

picker.addEventListener("change", () => {
  const rojo = config.rojos.find((r) => String(r.id) === picker.value);
  chat.rojoId = rojo?.id ?? null;
  localStorage.setItem(storageKey, picker.value);
  showTools(rojo);
  models.show(rojo); // another rojo: its default model, until one is picked
});

const instructionFiles = document.querySelector(".instruction-files");
/** The project's instruction files the next request sends, each a link that opens it in the
 * file panel (the download address for a new tab). */
function showInstructions(paths) {
  instructionFiles.replaceChildren();
  instructionFiles.hidden = !paths.length;
  if (!paths.length) return;
  instructionFiles.append("Instructions: ");
  paths.forEach((path, index) => {
    if (index) instructionFiles.append(", ");
    const link = document.createElement("a");
    link.href = `/api/projects/${config.project.id}/files/download?path=${encodeURIComponent(path)}`;
    link.textContent = visibleText(path);
    link.title = "Instructions the rojo follows in this conversation: open the file";
    link.addEventListener("click", (event) => {
      if (event.ctrlKey || event.metaKey || event.shiftKey || event.button !== 0) return;
      event.preventDefault();
      files.openFile(path);
    });
    instructionFiles.append(link);
  });
}

const usageTotal = document.querySelector(".usage-total");
const meter = document.querySelector(".context-meter");
/** The conversation's total tokens and cost, and how full its next request would be. */
chat.addEventListener("usage", (event) => {
  const { total, context } = event.detail;
  showInstructions(event.detail.instructions ?? []);
  usageTotal.hidden = !total.calls;
  usageTotal.textContent = `This conversation: ${usageText(total)}`;
  meter.hidden = !context.window;
  const share = context.window ? Math.min(context.used / context.window, 1) : 0;
  meter.querySelector("meter").value = share;
  meter.querySelector(".context-text").textContent = contextText(context);
  meter.title = "How much of the rojo's context window the next request would take; older "
    + "turns are left out or summarised to keep it under the window.";
});

const conversations = new ConversationList(document.querySelector(".conversations"), {
  projectId: config.project.id,
  canWrite: config.canWrite,
  nextCursor: config.nextCursor,
  currentId: config.conversation,
  username: config.username,
});
new Branches(chat);
chat.addEventListener("opened", (event) => messageReveal(chat, event.detail));
// An activity line's "Open … in the file panel" (static/rojo/activity.js).
chat.element.addEventListener("open-file", (event) => files.openFile(event.detail.path));

// A reply waiting for approval marks its conversation in the list at once (class
// approval-waiting and its badge); the list's poll keeps the other conversations' badges.
chat.addEventListener("approval", (event) => {
  const { conversation, waiting } = event.detail;
  const li = document.querySelector(`.conversation-list li[data-id="${conversation}"]`);
  li?.classList.toggle("approval-waiting", waiting);
  conversations.badgeShow(conversation, waiting ? "waiting" : "running");
});

chat.addEventListener("files-changed", () => files.refresh());
chat.addEventListener("turn-finished", () => {
  files.refresh();
  conversations.poll(); // the badge: done, or failed
});
chat.addEventListener("conversation", (event) => {
  const id = event.detail;
  showExport(id);
  share.show(id);
  history.replaceState(null, "", `/projects/${config.project.id}/c/${id}/`);
  const asked = [...document.querySelectorAll("rojo-chat-panel .bubble.user")].at(-1);
  const listed = document.querySelector(`.conversation-list li[data-id="${id}"]`);
  if (listed) {
    for (const li of document.querySelectorAll(".conversation-list li")) li.removeAttribute("aria-current");
    listed.setAttribute("aria-current", "page");
    conversations.currentId = id;
  } else conversations.addCurrent(id, conversationTitle(asked?.text ?? "") || "New conversation");
});

// Each turn makes its conversation the most recent one, as the server orders them.
chat.addEventListener("turn", (event) => conversations.touched(event.detail));

for (const tab of document.querySelectorAll(".panel-tabs button")) {
  tab.addEventListener("click", () => {
    workspace.dataset.view = tab.dataset.show;
    for (const other of document.querySelectorAll(".panel-tabs button")) {
      other.setAttribute("aria-pressed", String(other === tab));
    }
    // What streamed while the chat was hidden could not scroll it: catch up now.
    if (tab.dataset.show === "chat") chat.followEnd();
  });
}

const polish = workspacePolish({ panel: document.querySelector("rojo-chat-panel"), chat, files, config });
files.refresh();
if (config.conversation) {
  sentKeyForget(config.project.id); // a message sent from here went to this conversation
  chat
    .open(config.conversation)
    .catch((error) => chat.addError(error.message))
    .finally(() => polish.opened());
} else {
  document.getElementById("message-input").focus();
  // A message this tab sent got no answer (its server died before the reply started):
  // open the conversation it is in.
  const key = sentKeyPending(config.project.id);
  if (key) chat.openSent(key).catch((error) => chat.addError(error.message));
}
