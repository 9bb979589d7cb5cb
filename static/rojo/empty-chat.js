// What a new conversation shows before the first message: what the rojo does, and a few
// requests to start from (a click puts one in the box, to edit or send).

const EXAMPLES = [
  { text: "List the files in this project and tell me what each folder is for.", writes: false },
  { text: "Find every TODO in the project and list them by file.", writes: false },
  { text: "Create notes/next-steps.md with a checklist of three next steps.", writes: true },
];

/** Show the hint in `panel` while its log is empty; `opening` while a stored one loads. */
export function emptyChatHint(panel, { canWrite, opening }) {
  const log = panel.querySelector(".messages");
  const input = panel.querySelector("textarea");
  const hint = document.createElement("section");
  hint.className = "empty-chat";
  hint.setAttribute("aria-label", "Getting started");
  const lead = document.createElement("p");
  lead.textContent = canWrite
    ? "Ask the rojo to read, search or change this project's files. Each tool call shows as it " +
      "runs, and every change can be undone."
    : "Ask the rojo about this project's files: as a viewer, it can read and search them.";
  const list = document.createElement("div");
  list.className = "examples";
  for (const example of EXAMPLES.filter((e) => canWrite || !e.writes)) {
    const button = document.createElement("button");
    button.type = "button";
    button.className = "example";
    button.textContent = example.text;
    button.addEventListener("click", () => {
      input.value = example.text;
      input.focus();
    });
    list.append(button);
  }
  hint.append(lead, list);
  log.before(hint);
  let loading = Boolean(opening);
  const update = () => {
    const shown = !hint.hidden;
    hint.hidden = loading || log.childElementCount > 0;
    // While the hint showed, the log was as tall as what it held, so it could not scroll to
    // its end: now it can, and a first message taller than the log must not leave it at the top.
    if (shown && hint.hidden) log.scrollTop = log.scrollHeight;
  };
  new MutationObserver(update).observe(log, { childList: true });
  update();
  return {
    /** The stored conversation is shown (or failed to load). */
    opened() {
      loading = false;
      update();
    },
  };
}
