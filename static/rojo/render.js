// A tool call's activity line, built as DOM nodes; every text goes in as text, never as HTML,
// and hidden characters in it show as escapes.

import { counted } from "./counted.js";
import { icon } from "./icons.js";
import { visible } from "./visible.js";

/** `text` cut to `max` characters, never inside a surrogate pair (a tag character, say). */
export function short(text, max = 60) {
  if (text.length <= max) return text;
  const cut = /[\uD800-\uDBFF]/.test(text[max - 2]) ? max - 2 : max - 1;
  return `${text.slice(0, cut)}…`;
}

/** `create_directory("docs/intro")`, `write_text_content("docs/intro/index.page", …)`,
 * `update_plan(2 of 5 done)`. */
export function summarize(name, args) {
  if (name === "update_plan" && Array.isArray(args?.plan)) {
    // The plan itself is the checklist at the top of the turn (plan.js): here, how far it is.
    const done = args.plan.filter((item) => item?.status === "done").length;
    return `update_plan(${done} of ${args.plan.length} done)`;
  }
  if (args && typeof args === "object" && !Array.isArray(args)) {
    const values = Object.values(args);
    if (!values.length) return `${name}()`;
    const first = short(JSON.stringify(values[0]));
    return `${name}(${first}${values.length > 1 ? ", …" : ""})`;
  }
  return `${name}(${short(String(args ?? ""))})`;
}

/** An empty activity line, `⚙ <call><outcome>` over a folded <pre> for the arguments: the
 * one shape of a finished call's line and of one the model is still writing. */
export function toolLineParts(className) {
  const line = document.createElement("details");
  line.className = className;
  const summary = document.createElement("summary");
  const gear = document.createElement("span");
  gear.className = "gear";
  gear.setAttribute("aria-hidden", "true");
  gear.append(icon("gear"));
  const call = document.createElement("span");
  call.className = "call";
  const outcome = document.createElement("span");
  outcome.className = "outcome";
  summary.append(gear, " ", call, outcome);
  const args = document.createElement("pre");
  args.className = "tool-args";
  line.append(summary, args);
  return { line, call, outcome, args };
}

/** One dim activity line: `⚙ name(args) …`, the full arguments folded under it. */
export function toolLine({ id, name, args }) {
  const parts = toolLineParts("tool-line pending");
  parts.line.dataset.id = id;
  parts.line.dataset.tool = name;
  parts.call.append(...visible(summarize(name, args)));
  parts.outcome.textContent = " …";
  parts.args.append(...visible(typeof args === "string" ? args : JSON.stringify(args, null, 2)));
  return parts.line;
}

const number = new Intl.NumberFormat("en-US");

/** A dollar amount: cents for large ones, more digits for the small costs of one reply. */
export function dollars(text) {
  const value = Number(text);
  if (value === 0) return "$0";
  return value >= 1 ? `$${value.toFixed(2)}` : `$${value.toPrecision(2)}`;
}

/** `1,234 tokens in (800 cached) · 56 out · $0.0012`; `≈` when some are estimates. */
export function usageText({ prompt, completion, cached, cost, estimated }) {
  const cachedPart = cached ? ` (${number.format(cached)} cached)` : "";
  const parts = [`${counted(prompt, "token")} in${cachedPart}`, `${number.format(completion)} out`];
  if (cost !== null && cost !== undefined) parts.push(dollars(cost));
  return `${estimated ? "≈ " : ""}${parts.join(" · ")}`;
}

/** `45% of the window (5,400 of 12,000 tokens)`. */
export function contextText({ used, window }) {
  const share = window ? Math.round((100 * used) / window) : 0;
  return `${share}% of the window (${number.format(used)} of ${counted(window, "token")})`;
}
