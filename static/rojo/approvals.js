// A call waiting for approval: what it would change, and Approve / Deny for those who may write.
// Names, paths and the diff show their hidden characters as escapes: what is approved is what
// is shown.

import { ApiError, request } from "./api.js";
import { visible, visibleText } from "./visible.js";

/** The question for call `id`; `onError(message)` tells of a decision that was not sent. */
export function approvalPrompt({ id, name, preview }, { canWrite, conversationId, onError }) {
  const box = document.createElement("div");
  box.className = "approval";
  box.setAttribute("role", "group");
  box.setAttribute("aria-label", `Approve ${visibleText(name)}?`);
  const question = document.createElement("p");
  question.append("The rojo wants to run ", ...visible(name), "; it changes existing files.");
  box.append(question, previewNode(preview));
  if (canWrite) {
    box.append(decisionButtons(id, conversationId, onError));
  } else {
    const note = document.createElement("p");
    note.className = "approval-wait";
    note.textContent = "Waiting for an editor of this project to approve or deny.";
    box.append(note);
  }
  return box;
}

function decisionButtons(id, conversationId, onError) {
  const actions = document.createElement("div");
  actions.className = "approval-actions";
  for (const [label, approve] of [["Approve", true], ["Deny", false]]) {
    const button = document.createElement("button");
    button.type = "button";
    button.textContent = label;
    button.className = approve ? "primary approve" : "deny";
    button.addEventListener("click", async () => {
      for (const b of actions.querySelectorAll("button")) b.disabled = true;
      try {
        await request(`/api/conversations/${conversationId}/approve`, {
          method: "POST",
          json: { call: id, approve },
        });
      } catch (error) {
        for (const b of actions.querySelectorAll("button")) b.disabled = false;
        onError(error instanceof ApiError ? error.message : "The decision was not sent.");
      }
    });
    actions.append(button);
  }
  return actions;
}

function previewNode(preview) {
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
