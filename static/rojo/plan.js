// The rojo's plan as a checklist at the top of its turn. The plan is the arguments of its
// update_plan calls: each call states the whole plan, so the box is redrawn from the last
// call (live, or replayed from stored turns), and put back to the plan before it when that
// call fails. While a call is still written, its steps so far (TOOL_CALL_DELTA's `steps`)
// take the place of the first steps of the plan shown, marked as changing. A live turn starts from the last plan in the log while steps are left, so
// the plan carries over between turns and disappears with the turns a fork drops. Every
// step's text is the model's: it goes in as text, never as HTML.

const TOOL = "update_plan";
const STATUSES = new Set(["pending", "in_progress", "done"]);
const MARKS = { done: "✓", in_progress: "▶", pending: "○" };
const WORDS = { done: "done", in_progress: "in progress", pending: "pending" };

/** The steps of update_plan's arguments, or null when they are not a plan the page can draw
 * (the tool refuses those too: its result says why). */
export function planSteps(args) {
  const steps = args && typeof args === "object" ? args.plan : null;
  if (!Array.isArray(steps) || !steps.length) return null;
  const valid = steps.every((item) => item && typeof item.step === "string" && STATUSES.has(item.status));
  return valid ? steps.map(({ step, status }) => ({ step, status })) : null;
}

export class TurnPlan {
  /** Checklists in `log` (a ChatLog). */
  constructor(log) {
    this.log = log;
    this.box = null; // the current turn's checklist, once it has one
    this.anchor = null; // what the box goes after: the turn's user message
    this.calls = new Map(); // id of an update_plan call of this turn -> the steps before it
    this.live = false; // the box of a live turn stays in view while the turn runs
  }

  /** One event of a turn, after the chat panel handled it (`live`: not a stored turn's). */
  handle(event, { live }) {
    if (event.type === "START") this.start({ live });
    else if (event.type === "TOOL_CALL_DELTA") this.delta(event.data);
    else if (event.type === "TOOL_CALL") this.call(event.data);
    else if (event.type === "TOOL_RESULT") this.result(event.data);
    else if (event.type === "DONE") this.end();
  }

  /** A turn begins (its user message is the log's last element); a live one shows the last
   * plan while any step of it is left to do. */
  start({ live }) {
    this.end();
    this.box = null;
    this.calls.clear();
    this.live = live;
    this.anchor = this.log.element.lastElementChild;
    const last = [...this.log.element.querySelectorAll(".turn-plan")].filter((box) => box.steps).pop()?.steps;
    if (live && last?.some((item) => item.status !== "done")) this.show(last, { carried: true });
  }

  /** The model is still writing an update_plan call: the steps that arrived are drawn over
   * the plan shown (a step whose status has not come yet as pending). */
  delta({ name, steps }) {
    if (name !== TOOL) return;
    const known = (Array.isArray(steps) ? steps : [])
      .filter((item) => item && typeof item.step === "string")
      .map(({ step, status }) => ({ step, status: STATUSES.has(status) ? status : "pending" }));
    if (known.length) this.show([...known, ...(this.box?.steps ?? []).slice(known.length)], { forming: true });
    this.box?.classList.add("updating");
  }

  /** A complete call: an update_plan call's plan is drawn at once, before it runs. */
  call({ id, name, args }) {
    if (name !== TOOL) return;
    const steps = planSteps(args);
    if (!steps) return;
    this.calls.set(id, this.box?.steps ?? null);
    this.show(steps);
  }

  /** A call's result: a refused plan gives way to the one before it. */
  result({ id, name, ok }) {
    if (name !== TOOL || ok || !this.calls.has(id)) return;
    const before = this.calls.get(id);
    if (before) this.show(before);
    else this.box?.remove();
  }

  /** The turn is over: its checklist stays where it is, no longer pinned. */
  end() {
    this.live = false;
    this.box?.classList.remove("live", "updating");
  }

  /** Draw `steps`; a forming call's are drawn without becoming the plan (`box.steps`). */
  show(steps, { carried = false, forming = false } = {}) {
    if (!this.box || !this.box.isConnected) this.box = this.newBox();
    const box = this.box;
    if (!forming) box.steps = steps;
    box.classList.remove("updating");
    box.classList.toggle("carried", carried);
    const done = steps.filter((item) => item.status === "done").length;
    box.head.textContent = `Plan · ${done} of ${steps.length} done${carried ? " · from the last turn" : ""}`;
    box.list.replaceChildren(...steps.map((item) => stepItem(item)));
  }

  newBox() {
    const box = document.createElement("section");
    box.className = this.live ? "turn-plan live" : "turn-plan";
    box.setAttribute("aria-label", "Plan");
    box.head = document.createElement("div");
    box.head.className = "turn-plan-head";
    box.list = document.createElement("ol");
    box.list.className = "turn-plan-steps";
    box.append(box.head, box.list);
    if (this.anchor?.isConnected) this.anchor.after(box);
    else this.log.append(box);
    return box;
  }
}

function stepItem({ step, status }) {
  const item = document.createElement("li");
  item.className = `turn-plan-step ${status}`;
  item.dataset.status = status;
  const mark = document.createElement("span");
  mark.className = "turn-plan-mark";
  mark.setAttribute("aria-hidden", "true");
  mark.textContent = MARKS[status];
  const text = document.createElement("span");
  text.className = "turn-plan-text";
  text.textContent = step;
  const word = document.createElement("span");
  word.className = "visually-hidden";
  word.textContent = ` (${WORDS[status]})`;
  item.append(mark, text, word);
  return item;
}
