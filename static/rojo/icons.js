// The app's icons as inline SVG drawn in currentColor: a pictograph character (📌 🗑 ⬇ ⚙) shows
// as a box on a machine without an emoji font, an SVG everywhere. An icon is decoration: the
// button or link that holds it carries the name (its text, or aria-label and title).

const SVG = "http://www.w3.org/2000/svg";

// Strokes on a 16-unit grid.
const PATHS = {
  pin: "M5.5 2h5M7 2v4.5L4.5 9h7L9 6.5V2M8 9v5",
  edit: "M11 2.5l2.5 2.5-7.5 7.5H3.5V10zM9.5 4l2.5 2.5",
  trash: "M2.5 4h11M6 4V2.5h4V4M4 4l.8 9.5h6.4L12 4M6.8 6.5v4.5M9.2 6.5v4.5",
  refresh: "M13 8a5 5 0 1 1-1.6-3.7M13.2 2v3h-3",
  close: "M4 4l8 8M12 4l-8 8",
  download: "M8 2v8M4.5 6.5L8 10l3.5-3.5M2.5 13.5h11",
  upload: "M8 10.5v-8M4.5 6L8 2.5 11.5 6M2.5 13.5h11",
  document: "M3.5 1.5h6l3 3v10h-9zM9.5 1.5v3h3M5.5 8h5M5.5 10.5h5",
  gear:
    "M8 5.6a2.4 2.4 0 1 0 0 4.8 2.4 2.4 0 1 0 0-4.8zM8 1.5v2M8 12.5v2M1.5 8h2M12.5 8h2" +
    "M3.4 3.4l1.4 1.4M11.2 11.2l1.4 1.4M3.4 12.6l1.4-1.4M11.2 4.8l1.4-1.4",
};

/** The icon `name` as an <svg> element, hidden from assistive technology. */
export function icon(name) {
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("class", `icon icon-${name}`);
  svg.setAttribute("viewBox", "0 0 16 16");
  svg.setAttribute("width", "1em");
  svg.setAttribute("height", "1em");
  svg.setAttribute("aria-hidden", "true");
  svg.setAttribute("focusable", "false");
  const path = document.createElementNS(SVG, "path");
  path.setAttribute("d", PATHS[name]);
  path.setAttribute("fill", "none");
  path.setAttribute("stroke", "currentColor");
  path.setAttribute("stroke-width", "1.5");
  path.setAttribute("stroke-linecap", "round");
  path.setAttribute("stroke-linejoin", "round");
  svg.append(path);
  return svg;
}
