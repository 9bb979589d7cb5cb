// A call waiting for approval: what it would change, and Approve / Deny for those who may write.
// Names, paths and the diff show their hidden characters as escapes: what is approved is what
// is shown.

import { changedPaths } from "./activity.js";
import { ApiError, request } from "./api.js";
import { visible, visibleText } from "./visible.js";

/** `a.md`, `a.md and b.md`, `a.md, b.md and c.md`, as visible text nodes. */
function pathList(paths) {
  const parts = [];
  paths.forEach((path, n) => {
    if (n) parts.push(n === paths.length - 1 ? " and " : ", ");
    const code = document.createElement("code");
    code.append(...visible(path));
    parts.push(code);
  });
  return parts;
}

/** The question for call `id`; `onError(message)` tells of a decision that was not sent. */
export function approvalPrompt({ id, name, args, preview, routed }, { canWrite, isOwner, conversationId, onError }) {
  const box = document.createElement("div");
  box.className = "approval";
  box.setAttribute("role", "group");
  const paths = changedPaths(args);
  const files = paths.length ? ` ${visibleText(paths.join(", "))}` : "";
  box.setAttribute("aria-label", `Approve ${visibleText(name)}${files}?`);
  const question = document.createElement("p");
  question.className = "approval-question";
  question.append("The rojo wants to run ", ...visible(name));
  if (paths.length) question.append(" on ", ...pathList(paths));
  question.append("; it changes existing files.");
  box.append(question, previewNode(preview));
  // A call routed to the owners ("changes need approval by an owner") is theirs to decide.
  if (routed ? isOwner : canWrite) {
    box.append(decisionButtons(id, name, conversationId, onError));
  } else {
    const note = document.createElement("p");
    note.className = "approval-wait";
    note.textContent = routed
      ? "Waiting for an owner to approve"
      : "Waiting for an editor of this project to approve or deny.";
    box.append(note);
  }
  return box;
}

const CHOICES = [
  { label: "Approve", className: "primary approve", approve: true, key: "a" },
  { label: "Deny", className: "deny", approve: false, key: "d" },
  { label: "Allow for this conversation", className: "allow", approve: true, allow: true },
];

function decisionButtons(id, name, conversationId, onError) {
  const actions = document.createElement("div");
  actions.className = "approval-actions";
  for (const choice of CHOICES) {
    const button = document.createElement("button");
    button.type = "button";
    button.textContent = choice.label;
    button.className = choice.className;
    if (choice.key) button.setAttribute("aria-keyshortcuts", choice.key);
    if (choice.allow) {
      button.title = `Approve, and run ${visibleText(name)} without asking for the rest of this conversation`;
    }
    button.addEventListener("click", async () => {
      for (const b of actions.querySelectorAll("button")) b.disabled = true;
      try {
        await request(`/api/conversations/${conversationId}/approve`, {
          method: "POST",
          json: { call: id, approve: choice.approve, allow_for_conversation: Boolean(choice.allow) },
        });
      } catch (error) {
        for (const b of actions.querySelectorAll("button")) b.disabled = false;
        onError(error instanceof ApiError ? error.message : "The decision was not sent.");
      }
    });
    actions.append(button);
  }
  const keys = document.createElement("span");
  keys.className = "approval-keys";
  keys.textContent = "Keys: A approves, D denies";
  actions.append(keys);
  return actions;
}

/** Whether a key press is someone typing (in the message box, a field), not a shortcut. */
function typing(event) {
  const target = event.target;
  return Boolean(target?.closest?.("textarea, input, select, [contenteditable]"));
}

// A approves and D denies the oldest question still open on the page.
document.addEventListener("keydown", (event) => {
  if (event.ctrlKey || event.metaKey || event.altKey || event.repeat || typing(event)) return;
  const key = event.key.toLowerCase();
  if (key !== "a" && key !== "d") return;
  const button = document.querySelector(`.approval button[aria-keyshortcuts="${key}"]:not(:disabled)`);
  if (!button) return;
  event.preventDefault();
  button.click();
});

/** What a call would change: its diff, lines marked, or a description; escaped. */
export function previewNode(preview) {
  const pre = document.createElement("pre");
  pre.className = "preview";
  if (preview?.diff !== undefined) {
    for (const text of (preview.diff || "(no change)").split("\n")) {
      const row = document.createElement("span");
      if (text.startsWith("+") && !text.startsWith("+++")) row.className = "added";
      else if (text.startsWith("-") && !text.startsWith("---")) row.className = "removed";
      row.append(...visible(`${text}\n`));
      pre.append(row);
    }
  } else {
    pre.append(...visible(previewText(preview)));
  }
  return pre;
}

function previewText(preview) {
  if (preview?.move) {
    return `move ${preview.move[0]} → ${preview.move[1]}${preview.replaces ? " (replaces it)" : ""}`;
  }
  if (preview?.mcp) {
    const { server, tool, note } = preview.mcp;
    return `${tool} on the MCP server ${server}\n(${note})`;
  }
  if (preview?.delete) return `delete:\n${preview.delete.map((p) => `  ${p}`).join("\n")}`;
  return preview?.error ? `preview failed: ${preview.error}` : JSON.stringify(preview);
}
