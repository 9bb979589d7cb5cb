// On a phone the rojo bar is one line (the rojo and the window meter); "More" opens the rest.

export function rojoBarCollapse(bar) {
  const more = document.createElement("button");
  more.type = "button";
  more.className = "rojo-bar-more";
  more.textContent = "More";
  more.setAttribute("aria-expanded", "false");
  more.setAttribute("aria-label", "More about this rojo and conversation");
  more.addEventListener("click", () => {
    const open = bar.classList.toggle("collapsed-open");
    more.setAttribute("aria-expanded", String(open));
    more.textContent = open ? "Less" : "More";
  });
  bar.append(more);
}
