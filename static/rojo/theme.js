// Dark or light: the system's choice (prefers-color-scheme) until the header's toggle picks
// one, remembered in this browser. The palettes are in theme.css. A classic script in the
// head, not a module: it sets the theme before the page is first painted, so a page chosen
// dark never flashes light.
(() => {
  const KEY = "rojo-chat:theme";
  const root = document.documentElement;
  const systemDark = window.matchMedia("(prefers-color-scheme: dark)");

  const stored = () => {
    const value = localStorage.getItem(KEY);
    return value === "dark" || value === "light" ? value : null;
  };
  const current = () => stored() ?? (systemDark.matches ? "dark" : "light");

  function apply() {
    const picked = stored();
    if (picked) root.dataset.theme = picked;
    else delete root.dataset.theme;
    const dark = current() === "dark";
    for (const button of document.querySelectorAll(".theme-toggle")) {
      button.setAttribute("aria-pressed", String(dark));
      button.title = dark ? "Switch to light mode" : "Switch to dark mode";
    }
  }

  apply();
  systemDark.addEventListener("change", apply);
  document.addEventListener("DOMContentLoaded", () => {
    apply();
    for (const button of document.querySelectorAll(".theme-toggle")) {
      button.addEventListener("click", () => {
        localStorage.setItem(KEY, current() === "dark" ? "light" : "dark");
        apply();
      });
    }
  });
})();
