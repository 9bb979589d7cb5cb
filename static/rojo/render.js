// Building the chat's pieces as DOM nodes; every text goes in as text, never as HTML.

export function short(text, max = 60) {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

/** `create_directory("docs/intro")`, `write_text_content("docs/intro/index.page", …)`. */
export function summarize(name, args) {
  if (args && typeof args === "object" && !Array.isArray(args)) {
    const values = Object.values(args);
    if (!values.length) return `${name}()`;
    const first = short(JSON.stringify(values[0]));
    return `${name}(${first}${values.length > 1 ? ", …" : ""})`;
  }
  return `${name}(${short(String(args ?? ""))})`;
}

export function parseMaybe(text) {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** One dim activity line: `⚙ name(args) …`, the full arguments folded under it. */
export function toolLine({ id, name, args }) {
  const line = document.createElement("details");
  line.className = "tool-line pending";
  line.dataset.id = id;
  line.dataset.tool = name;
  const summary = document.createElement("summary");
  const gear = document.createElement("span");
  gear.className = "gear";
  gear.setAttribute("aria-hidden", "true");
  gear.textContent = "⚙";
  const call = document.createElement("span");
  call.className = "call";
  call.textContent = summarize(name, args);
  const outcome = document.createElement("span");
  outcome.className = "outcome";
  outcome.textContent = " …";
  summary.append(gear, " ", call, outcome);
  const full = document.createElement("pre");
  full.className = "tool-args";
  full.textContent = typeof args === "string" ? args : JSON.stringify(args, null, 2);
  line.append(summary, full);
  return line;
}

/** The question for a call waiting for approval, with what it would change. */
export function approvalBox({ name, preview }) {
  const box = document.createElement("div");
  box.className = "approval";
  box.setAttribute("role", "group");
  box.setAttribute("aria-label", `Approve ${name}?`);
  const question = document.createElement("p");
  question.textContent = `The rojo wants to run ${name}; it changes existing files.`;
  box.append(question, previewNode(preview));
  return box;
}

function previewNode(preview) {
  const pre = document.createElement("pre");
  pre.className = "preview";
  if (preview?.diff !== undefined) {
    for (const text of (preview.diff || "(no change)").split("\n")) {
      const row = document.createElement("span");
      if (text.startsWith("+") && !text.startsWith("+++")) row.className = "added";
      else if (text.startsWith("-") && !text.startsWith("---")) row.className = "removed";
      row.textContent = `${text}\n`;
      pre.append(row);
    }
  } else if (preview?.move) {
    pre.textContent = `move ${preview.move[0]} → ${preview.move[1]}${preview.replaces ? " (replaces it)" : ""}`;
  } else if (preview?.delete) {
    pre.textContent = `delete:\n${preview.delete.map((p) => `  ${p}`).join("\n")}`;
  } else {
    pre.textContent = preview?.error ? `preview failed: ${preview.error}` : JSON.stringify(preview);
  }
  return pre;
}
