// Activity lines beyond their one-line summary: a call shown while the model still writes it
// (TOOL_CALL_DELTA), the calls of one response grouped, and what a line shows when opened:
// its arguments and its result, pretty-printed, a diff for writes and edits, an error in
// full. Every text goes in as text, with hidden characters shown as escapes.

import { getJson } from "./api.js";
import { counted } from "./counted.js";
import { summarize, toolLineParts } from "./render.js";
import { visible } from "./visible.js";

/** The paths a call names: what it writes, edits, deletes, or moves from and to. */
export function changedPaths(args) {
  if (!args || typeof args !== "object") return [];
  if (typeof args.source === "string") {
    return [args.source, args.destination].filter((p) => typeof p === "string");
  }
  return typeof args.path === "string" ? [args.path] : [];
}

/** A unified diff as rows, added and removed lines marked (and coloured by app.css). */
export function diffNode(diff, className = "diff") {
  const pre = document.createElement("pre");
  pre.className = className;
  for (const text of (diff || "(no change)").split("\n")) {
    const row = document.createElement("span");
    if (text.startsWith("+") && !text.startsWith("+++")) row.className = "added";
    else if (text.startsWith("-") && !text.startsWith("---")) row.className = "removed";
    row.append(...visible(`${text}\n`));
    pre.append(row);
  }
  return pre;
}

// The built-in calls that leave a file to open (a delete leaves none, a folder is no file).
const OPENS_A_FILE = new Set(["write_text_content", "edit_text_content", "move_path"]);

/** A button per file a change left, which opens it (its preview, where it has one) in the
 * file panel: the page listens for the `open-file` event this sends. */
function openButtons(args) {
  const paths = changedPaths(args);
  const left = typeof args?.source === "string" ? paths.slice(1) : paths; // a move: where it went
  return left.map((path) => {
    const button = document.createElement("button");
    button.type = "button";
    button.className = "open-changed-file";
    button.append("Open ", ...visible(path), " in the file panel");
    button.addEventListener("click", () => {
      button.dispatchEvent(new CustomEvent("open-file", { bubbles: true, detail: { path } }));
    });
    return button;
  });
}

function section(label, body) {
  const box = document.createElement("div");
  box.className = "tool-section";
  const head = document.createElement("div");
  head.className = "tool-section-label";
  head.textContent = label;
  box.append(head, body);
  return box;
}

function textBlock(text, className) {
  const pre = document.createElement("pre");
  pre.className = className;
  pre.append(...visible(text));
  return pre;
}

/** Whether a result is the head of one too large to hand the model (kept for read_result). */
function isPaged(result) {
  return Boolean(result) && typeof result === "object" && typeof result.handle === "string"
    && typeof result.size === "number" && typeof result.head === "string";
}

/** A result as a person reads it: text as it is, anything else as indented JSON. */
function resultText(result) {
  return typeof result === "string" ? result : JSON.stringify(result, null, 2);
}

function amount(value) {
  return Number.isInteger(value) ? String(value) : value.toFixed(2).replace(/\.?0+$/, "");
}

/** A progress report in words: "3/10 (30%) · Fetching page 3", or "3 · …" with no total. */
export function progressText({ progress, total, message }) {
  let text = amount(progress);
  if (typeof total === "number" && total > 0) {
    const percent = Math.min(100, Math.max(0, Math.floor((100 * progress) / total)));
    text = `${text}/${amount(total)} (${percent}%)`;
  }
  return message ? `${text} · ${message}` : text;
}

export class Activity {
  /** Lines in `log` (a ChatLog); `conversationId()` names the conversation, for the link to
   * a kept result's whole. */
  constructor(log, { conversationId = () => null } = {}) {
    this.log = log;
    this.conversationId = conversationId;
    this.forming = new Map(); // the place of a call in the response being written -> its line
    this.group = null; // the box of the response's parallel calls
  }

  /** More of a call the model is still writing: its line appears, then grows. */
  delta({ index, id, name, chars, path, text }) {
    let line = this.forming.get(index);
    if (!line) {
      line = this.formingLine(index);
      this.forming.set(index, line);
    }
    line.dataset.id = id;
    line.dataset.tool = name;
    const call = line.querySelector(".call");
    call.replaceChildren(...visible(summarize(name, path === undefined ? "…" : { path, more: 1 })));
    line.querySelector(".outcome").textContent = ` … ${counted(chars, "character")} so far`;
    if (text) {
      const preview = line.querySelector(".tool-args");
      // The preview follows its end as the text grows, unless the reader scrolled up in it.
      const following = preview.hidden || !preview.scrolledUp;
      preview.hidden = false;
      preview.append(...visible(text));
      if (following) {
        preview.scrollTop = preview.scrollHeight;
        preview.scrolledUp = false;
      }
    }
  }

  formingLine(index) {
    this.log.closeBubble();
    const { line, args: preview } = toolLineParts("tool-line pending forming");
    preview.hidden = true; // until the call has text to show
    preview.scrolledUp = false;
    preview.addEventListener("scroll", () => {
      preview.scrolledUp = preview.scrollHeight - preview.scrollTop - preview.clientHeight > 4;
    });
    const first = this.forming.get(0);
    if (index > 0 && first) {
      // A second call of the same response: they are written in parallel, and say so now.
      const group = this.groupOf(first);
      group.append(line);
      this.countGroup(group);
      return line;
    }
    return this.log.append(line);
  }

  /** The group box `line` is in, made around it if it has none. */
  groupOf(line) {
    let group = line.closest(".tool-group");
    if (!group) {
      group = document.createElement("div");
      group.className = "tool-group";
      group.setAttribute("role", "group");
      const label = document.createElement("div");
      label.className = "tool-group-label";
      group.append(label);
      line.before(group);
      group.append(line);
    }
    this.group = group;
    return group;
  }

  countGroup(group) {
    const count = group.querySelectorAll(":scope > .tool-line").length;
    group.querySelector(".tool-group-label").textContent = `${counted(count, "call")} at once`;
    group.setAttribute("aria-label", `${counted(count, "tool call")} made at once`);
  }

  /** The call, complete: its line (the forming one replaced), in its response's group. */
  call(data) {
    const line = this.log.addToolCall(data);
    line.args = data.args;
    const forming = [...this.forming].find(([, l]) => l.dataset.id === data.id);
    if (forming) {
      this.forming.delete(forming[0]);
      forming[1].replaceWith(line);
    }
    if (data.of > 1) {
      if (data.index === 0 || !this.group?.isConnected) this.groupOf(line);
      else if (line.parentElement !== this.group) this.group.append(line);
      this.countGroup(line.closest(".tool-group"));
    } else if (!forming) {
      this.group = null;
    }
    line.addEventListener("toggle", () => line.open && this.opened(line));
    return line;
  }

  /** How far a running call has come, as its MCP server says: the latest replaces the last. */
  progress(data) {
    const line = this.log.lines.get(data.id);
    if (!line?.classList.contains("pending")) return; // its result came, or it is not shown
    const outcome = line.querySelector(".outcome");
    outcome.classList.add("progress");
    outcome.replaceChildren(...visible(` … ${progressText(data)}`)); // the server's text, as text
  }

  /** What the call returned, under its arguments (an error in full). */
  result(line, { name, result, ok, change }) {
    line.querySelector(".tool-result")?.remove();
    const box = document.createElement("div");
    box.className = "tool-result";
    const args = line.querySelector(".tool-args");
    if (args && !args.closest(".tool-section")) {
      const next = args.nextSibling; // section() moves the arguments into it
      line.insertBefore(section("Arguments", args), next);
    }
    if (!ok) {
      const message = result && typeof result === "object" && "error" in result ? result.error : resultText(result);
      box.append(section("Error", textBlock(String(message), "tool-error")));
    } else if (result && typeof result === "object" && typeof result.diff === "string") {
      box.append(section("Changes", diffNode(result.diff)));
    } else if (isPaged(result)) {
      box.append(section("Result", this.pagedNode(result)));
    } else if (change && name === "write_text_content") {
      box.dataset.diffChange = String(change); // fetched when the line is opened
      box.append(section("Changes", textBlock("…", "diff")));
    } else {
      box.append(section("Result", textBlock(resultText(result), "tool-output")));
    }
    if (ok && change && OPENS_A_FILE.has(name)) box.append(...openButtons(line.args));
    line.append(box);
    if (line.open) this.opened(line);
  }

  /** A result too large to hand the model: its head, and a link to the whole. */
  pagedNode({ head, size, handle }) {
    const holder = document.createElement("div");
    const conversation = this.conversationId();
    const note = document.createElement("p");
    note.className = "tool-paged";
    note.append(`${counted(size, "byte")}; the rojo got the start and reads on with read_result. `);
    if (conversation) {
      const link = document.createElement("a");
      link.href = `/api/conversations/${encodeURIComponent(conversation)}/results/${encodeURIComponent(handle)}`;
      link.target = "_blank";
      link.rel = "noopener";
      link.textContent = "Open the whole result";
      note.append(link);
    }
    holder.append(note, textBlock(head, "tool-output"));
    return holder;
  }

  /** A line opened: fetch the diff a write kept, the first time. */
  async opened(line) {
    const box = line.querySelector(".tool-result[data-diff-change]");
    if (!box || box.dataset.loading) return;
    box.dataset.loading = "1";
    const holder = box.querySelector(".tool-section");
    try {
      const { diff } = await getJson(`/api/changes/${box.dataset.diffChange}/diff`);
      holder.querySelector("pre").replaceWith(diffNode(diff));
      delete box.dataset.diffChange;
    } catch {
      holder.querySelector("pre").replaceChildren("(the diff could not be loaded)");
      delete box.dataset.loading;
    }
  }

  /** The turn ended: a call still being written never ran. */
  endForming() {
    for (const line of this.forming.values()) {
      line.classList.remove("pending", "forming");
      line.classList.add("error");
      line.querySelector(".outcome").textContent = " → not run: the reply ended before this call was complete";
    }
    this.forming.clear();
    this.group = null;
  }

  clear() {
    this.forming.clear();
    this.group = null;
  }
}
