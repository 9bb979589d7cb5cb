// Dark or light: the system's choice (prefers-color-scheme) until the header's toggle picks
// one, remembered in this browser. The palettes are in theme.css.

const KEY = "rojo-chat:theme";
const root = document.documentElement;
const systemDark = window.matchMedia("(prefers-color-scheme: dark)");

function stored() {
  const value = localStorage.getItem(KEY);
  return value === "dark" || value === "light" ? value : null;
}

/** The theme in effect: the one picked, else the system's. */
export function currentTheme() {
  return stored() ?? (systemDark.matches ? "dark" : "light");
}

function apply() {
  const picked = stored();
  if (picked) root.dataset.theme = picked;
  else delete root.dataset.theme;
  const dark = currentTheme() === "dark";
  for (const button of document.querySelectorAll(".theme-toggle")) {
    button.setAttribute("aria-pressed", String(dark));
    button.title = dark ? "Switch to light mode" : "Switch to dark mode";
  }
}

apply();
systemDark.addEventListener("change", apply);
for (const button of document.querySelectorAll(".theme-toggle")) {
  button.addEventListener("click", () => {
    localStorage.setItem(KEY, currentTheme() === "dark" ? "light" : "dark");
    apply();
  });
}
