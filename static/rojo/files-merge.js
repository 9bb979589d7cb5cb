// The merge view's room: a wide dialog over the page, because the file panel's column left
// each of its two panes about 130 px and cut every line. The editor's own nodes (its note, its
// area and its Save / Close buttons) are lent to the dialog and given back where they were, so
// the editor keeps one set of controls whichever room it is in.

export class MergeDialog {
  constructor({ onDismiss }) {
    this.dialog = document.createElement("dialog");
    this.dialog.className = "merge-dialog";
    this.dialog.setAttribute("aria-label", "Merge your text with the file as it is now");
    this.body = document.createElement("div");
    this.body.className = "merge-dialog-body";
    this.actions = document.createElement("div");
    this.actions.className = "merge-dialog-actions";
    this.dialog.append(this.body, this.actions);
    this.lent = [];
    // Escape closes the dialog: the editor decides what becomes of the merge.
    this.dialog.addEventListener("close", () => {
      if (this.lent.length) onDismiss();
    });
    document.body.append(this.dialog);
  }

  get open() {
    return this.dialog.open;
  }

  /** Show `nodes` in the dialog (the last `buttons` of them in its action row). */
  show(nodes, buttons) {
    this.giveBack();
    for (const node of [...nodes, ...buttons]) {
      const mark = document.createComment("lent to the merge dialog");
      node.before(mark);
      this.lent.push([node, mark]);
    }
    this.body.append(...nodes);
    this.actions.append(...buttons);
    if (!this.dialog.open) this.dialog.showModal();
  }

  /** Every lent node back in its place, and the dialog closed. */
  giveBack() {
    const lent = this.lent;
    this.lent = [];
    for (const [node, mark] of lent) mark.replaceWith(node);
    if (this.dialog.open) this.dialog.close();
  }
}
