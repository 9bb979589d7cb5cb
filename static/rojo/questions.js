// A question an MCP server asks during a call (elicitation): a form built from the schema's
// primitive fields (text, number, integer, yes/no, a choice, several choices), or a link to visit, with
// Accept, Decline and Cancel and the time left. All the server's text goes in as text, never
// as markup; a link is only ever http(s), and opened only by the person.

import { ApiError, request } from "./api.js";

const FORMATS = { email: "email", uri: "url", date: "date", "date-time": "datetime-local" };

/** The choices of a string field (or of a list field's `items`): `enum` (named by
 * `enumNames`) or `oneOf`/`anyOf` of consts. */
function choices(field) {
  if (!field || typeof field !== "object") return null;
  if (Array.isArray(field.enum)) {
    return field.enum.map((value, n) => ({ value: String(value), title: field.enumNames?.[n] ?? String(value) }));
  }
  const options = field.oneOf ?? field.anyOf;
  if (Array.isArray(options) && options.every((o) => o && "const" in o)) {
    return options.map((o) => ({ value: String(o.const), title: String(o.title ?? o.const) }));
  }
  return null;
}

/** One field of the form: its label, its control, its description. */
function fieldNode(name, field, required) {
  const row = document.createElement("label");
  row.className = "question-field";
  const title = document.createElement("span");
  title.textContent = `${field.title ?? name}${required ? " *" : ""}`;
  let control;
  const options = field.type === "string" || !field.type ? choices(field) : null;
  const several = field.type === "array" ? choices(field.items) : null;
  if (several) {
    // Several choices (SEP-1330): a list box, the schema's defaults chosen.
    control = document.createElement("select");
    control.multiple = true;
    control.size = Math.min(several.length, 6);
    const chosen = new Set((Array.isArray(field.default) ? field.default : []).map(String));
    for (const { value, title: label } of several) {
      control.append(new Option(label, value, false, chosen.has(value)));
    }
  } else if (options) {
    control = document.createElement("select");
    if (!required) control.append(new Option("", ""));
    for (const { value, title: label } of options) control.append(new Option(label, value));
    if (field.default !== undefined) control.value = String(field.default);
  } else {
    control = document.createElement("input");
    if (field.type === "boolean") {
      control.type = "checkbox";
      control.checked = Boolean(field.default);
    } else if (field.type === "number" || field.type === "integer") {
      control.type = "number";
      control.step = field.type === "integer" ? "1" : "any";
      if (field.minimum !== undefined) control.min = String(field.minimum);
      if (field.maximum !== undefined) control.max = String(field.maximum);
    } else {
      control.type = FORMATS[field.format] ?? "text";
      if (field.minLength !== undefined) control.minLength = field.minLength;
      if (field.maxLength !== undefined) control.maxLength = field.maxLength;
    }
    if (field.default !== undefined && field.type !== "boolean") control.value = String(field.default);
  }
  // The server's name for the field, kept as data, not as the control's name: a form's
  // named controls shadow its own properties (a field called `querySelectorAll` or
  // `reportValidity` broke the box, and the replay of the conversation after it).
  control.dataset.field = name;
  control.dataset.type = field.type ?? "string";
  if (required && field.type !== "boolean") control.required = true;
  row.append(title, control);
  if (field.description) {
    const note = document.createElement("small");
    note.textContent = field.description;
    row.append(note);
  }
  return row;
}

/** The form's values by field name, typed as the schema says. Every field is sent: an empty
 * one as null (the server then gets it left out), a list of choices as a list, none chosen
 * an answer too; a field left out would get the schema's default back
 * (rojos/mcp/questions.py), the one the person had just removed. */
function formValues(form) {
  const values = {};
  for (const control of form.querySelectorAll("[data-field]")) {
    const { field, type } = control.dataset;
    if (type === "boolean") values[field] = control.checked;
    else if (type === "array") values[field] = [...control.selectedOptions].map((option) => option.value);
    else if (control.value === "") values[field] = null;
    else if (type === "integer") values[field] = Number.parseInt(control.value, 10);
    else if (type === "number") values[field] = Number(control.value);
    else values[field] = control.value;
  }
  return values;
}

function linkNode(url) {
  let parsed;
  try {
    parsed = new URL(url);
  } catch {
    parsed = null;
  }
  const p = document.createElement("p");
  if (!parsed || !["http:", "https:"].includes(parsed.protocol)) {
    p.textContent = "(The server gave a link that is not a web address; it is not offered.)";
    return p;
  }
  const a = document.createElement("a");
  a.href = parsed.href;
  a.textContent = parsed.href;
  a.target = "_blank";
  a.rel = "noopener noreferrer";
  p.append("Open ", a, " if you want to; Accept tells the server you will.");
  return p;
}

/** The question box for a QUESTION event; `live` adds the buttons and the countdown. */
export function questionPrompt(data, { conversationId, onError, live, username }) {
  const box = document.createElement("form");
  box.className = "question";
  box.dataset.question = data.id;
  box.setAttribute("aria-label", `Question from the MCP server ${data.server}`);
  box.noValidate = false;
  const head = document.createElement("p");
  head.className = "question-head";
  const server = document.createElement("strong");
  server.textContent = data.server;
  head.append("The MCP server ", server, " asks:");
  const message = document.createElement("p");
  message.className = "question-message";
  message.textContent = data.message;
  box.append(head, message);
  if (data.mode === "url") {
    box.append(linkNode(data.url));
  } else {
    const schema = data.schema ?? {};
    const required = new Set(schema.required ?? []);
    for (const [name, field] of Object.entries(schema.properties ?? {})) {
      box.append(fieldNode(name, field ?? {}, required.has(name)));
    }
  }
  // Only the person whose turn it is answers; anyone else following the reply sees it wait.
  const theirs = live && data.user && username && data.user !== username;
  if (live && !theirs) box.append(answerButtons(box, data, conversationId, onError));
  else for (const control of box.querySelectorAll("input, select")) control.disabled = true;
  if (theirs) {
    const wait = document.createElement("p");
    wait.className = "question-wait";
    wait.textContent = `Waiting for ${data.user} to answer.`;
    box.append(wait);
  }
  return box;
}

function answerButtons(box, data, conversationId, onError) {
  const actions = document.createElement("div");
  actions.className = "question-actions";
  const left = document.createElement("span");
  left.className = "question-time";
  const send = async (action) => {
    if (action === "accept" && data.mode !== "url" && !box.reportValidity()) return;
    const buttons = actions.querySelectorAll("button");
    for (const b of buttons) b.disabled = true;
    const json = { question: data.id, action };
    if (action === "accept" && data.mode !== "url") json.content = formValues(box);
    try {
      await request(`/api/conversations/${conversationId}/answer`, { method: "POST", json });
    } catch (error) {
      for (const b of buttons) b.disabled = false;
      onError(error instanceof ApiError ? error.message : "The answer was not sent.");
    }
  };
  for (const [label, action, className] of [
    ["Accept", "accept", "primary"],
    ["Decline", "decline", ""],
    ["Cancel", "cancel", ""],
  ]) {
    const button = document.createElement("button");
    button.type = action === "accept" ? "submit" : "button";
    button.textContent = label;
    button.className = className;
    button.dataset.action = action;
    if (action !== "accept") button.addEventListener("click", () => send(action));
    actions.append(button);
  }
  box.addEventListener("submit", (event) => {
    event.preventDefault();
    send("accept");
  });
  if (data.seconds) {
    const ends = Date.now() + data.seconds * 1000;
    const tick = () => {
      const seconds = Math.max(0, Math.round((ends - Date.now()) / 1000));
      left.textContent = `${Math.floor(seconds / 60)}:${String(seconds % 60).padStart(2, "0")} left`;
      if (!seconds || !box.isConnected || box.classList.contains("answered")) clearInterval(timer);
    };
    const timer = setInterval(tick, 1000);
    tick();
  }
  actions.append(left);
  return actions;
}

const SAID = {
  accept: "Accepted",
  decline: "Declined",
  cancel: "Cancelled",
};

/** The question was answered (ANSWERED): its buttons go, and the answer is said. */
export function questionAnswered(box, data) {
  box.classList.add("answered");
  box.querySelector(".question-actions")?.remove();
  box.querySelector(".question-wait")?.remove();
  for (const control of box.querySelectorAll("input, select")) control.disabled = true;
  if (data.content) {
    const controls = new Map([...box.querySelectorAll("[data-field]")].map((c) => [c.dataset.field, c]));
    for (const [name, value] of Object.entries(data.content)) {
      const control = controls.get(name);
      if (!control) continue;
      if (control.type === "checkbox") control.checked = Boolean(value);
      else if (control.multiple) {
        const chosen = new Set((Array.isArray(value) ? value : [value]).map(String));
        for (const option of control.options) option.selected = chosen.has(option.value);
      } else control.value = value === null ? "" : String(value); // null: emptied
    }
  }
  const said = document.createElement("p");
  said.className = "question-answer";
  said.textContent = data.timed_out ? "No answer in time: the server was told Cancel." : SAID[data.action] ?? data.action;
  box.append(said);
}

/** Put the question under its call's activity line (or at the end of the log). */
export function questionPlace(log, box, call) {
  const after = (call ? log.lines.get(call) : null) ?? log.element.lastElementChild;
  if (after) after.after(box);
  else log.element.append(box);
  box.scrollIntoView({ block: "nearest" });
}
