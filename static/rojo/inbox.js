// The Approvals inbox: each call waiting for an owner, with its diff or preview (rendered as
// the chat renders it, escaped), and Approve / Deny. A turn that did not confirm the decision
// (503) says so: the entry stays, to try again.

import { ApiError, getJson, request } from "./api.js";
import { previewNode } from "./approvals.js";
import { visible } from "./visible.js";

const list = document.querySelector(".inbox-list");
const empty = document.querySelector(".inbox-empty");
const errorLine = document.querySelector(".inbox-error");

function showError(message) {
  errorLine.textContent = message;
  errorLine.hidden = !message;
}

function text(tag, className, value) {
  const node = document.createElement(tag);
  node.className = className;
  node.append(...visible(value));
  return node;
}

function entryNode(entry) {
  const item = document.createElement("li");
  item.className = "inbox-entry approval";
  item.dataset.id = String(entry.id);
  const head = document.createElement("p");
  head.className = "inbox-head";
  const where = document.createElement("a");
  where.href = `/projects/${entry.project}/c/${entry.conversation}/`;
  where.append(...visible(`${entry.project_name} · ${entry.conversation_title || "Untitled"}`));
  head.append(where, " — ", text("span", "inbox-user", entry.user), " asks to run ");
  head.append(text("code", "inbox-tool", entry.tool));
  if (entry.path) head.append(" on ", text("code", "inbox-path", entry.path));
  item.append(head, previewNode(entry.preview));
  const actions = document.createElement("div");
  actions.className = "approval-actions";
  for (const [label, approve, className] of [["Approve", true, "primary approve"], ["Deny", false, "deny"]]) {
    const button = document.createElement("button");
    button.type = "button";
    button.className = className;
    button.textContent = label;
    button.addEventListener("click", () => decide(entry, approve, actions));
    actions.append(button);
  }
  item.append(actions);
  return item;
}

async function decide(entry, approve, actions) {
  const buttons = actions.querySelectorAll("button");
  for (const b of buttons) b.disabled = true;
  showError("");
  try {
    await request(`/api/approvals/${entry.id}/decide`, { method: "POST", json: { approve } });
    list.querySelector(`[data-id="${entry.id}"]`)?.remove();
    empty.hidden = Boolean(list.children.length);
  } catch (error) {
    for (const b of buttons) b.disabled = false;
    const message = error instanceof ApiError ? error.message : "The decision was not sent.";
    showError(error?.status === 503 ? `Not delivered: ${message}` : message);
    if (error?.status === 404 || error?.status === 409) load();
  }
}

async function load() {
  try {
    const entries = await getJson("/api/approvals");
    list.replaceChildren(...entries.map(entryNode));
    empty.hidden = entries.length > 0;
  } catch (error) {
    showError(error instanceof ApiError ? error.message : "The inbox could not be loaded.");
  }
}

document.addEventListener("approvals-count", load);
load();
