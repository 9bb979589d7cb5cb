// Copy buttons: a message's text, a code block's code. The button has no text of its own (its
// icon comes from the style sheet), so a message still reads as exactly what was said.

/** Put `text` on the clipboard; false where the page may not. */
export async function copyText(text) {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    // No clipboard API (a page not served over https or from localhost): the old way.
    const box = document.createElement("textarea");
    box.value = text;
    box.setAttribute("readonly", "");
    box.style.position = "fixed";
    box.style.opacity = "0";
    document.body.append(box);
    box.select();
    const done = document.execCommand("copy");
    box.remove();
    return done;
  }
}

/** A small button that copies what `text()` gives when clicked, and says it did. */
export function copyButton(text, label) {
  const button = document.createElement("button");
  button.type = "button";
  button.className = "copy";
  button.title = label;
  button.setAttribute("aria-label", label);
  button.addEventListener("click", async (event) => {
    event.stopPropagation();
    const done = await copyText(text());
    button.dataset.copied = done ? "yes" : "no";
    button.title = done ? "Copied" : "Could not copy";
    clearTimeout(button.reset);
    button.reset = setTimeout(() => {
      delete button.dataset.copied;
      button.title = label;
    }, 1500);
  });
  return button;
}
