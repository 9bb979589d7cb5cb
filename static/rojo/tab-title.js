// The tab's title says when a reply runs or an approval waits, so another tab shows it.

const WAITING = "Approval needed · ";
const RUNNING = "● Working… · ";

/** Keep document.title in step with the chat panel: its busy note and approval prompts. */
export function tabTitleFollow(panel) {
  const base = document.title;
  const busy = panel.querySelector(".busy");
  const update = () => {
    let prefix = "";
    if (!busy.hidden) prefix = panel.querySelector(".approval") ? WAITING : RUNNING;
    const title = prefix + base;
    if (document.title !== title) document.title = title;
  };
  new MutationObserver(update).observe(panel, {
    subtree: true,
    childList: true,
    attributes: true,
    attributeFilter: ["hidden"],
  });
  update();
}
