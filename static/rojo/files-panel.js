// The file panel's editing side, wired onto the file browser: tree actions and uploads, the
// editor, the history, and the live stream that keeps them current.

import { FileActions } from "./files-actions.js";
import { DeletedFiles } from "./files-deleted.js";
import { FileEditor } from "./files-editor.js";
import { FileHistory } from "./files-history.js";
import { filesLive } from "./files-live.js";

export function filePanelExtras(panel, browser, { projectId, canWrite, onError }) {
  const options = { projectId, canWrite, onError };
  const actions = new FileActions(panel, browser, options);
  const editor = new FileEditor(browser.viewer, browser, options);
  const history = new FileHistory(browser.viewer, browser, options);
  const deleted = new DeletedFiles(panel, browser, options);
  browser.opened = (file) => {
    editor.opened(file);
    history.refresh();
  };
  const status = document.createElement("span");
  status.className = "live-status";
  panel.querySelector(".files-header h2").after(status);
  const live = filesLive(projectId, status, async (changes) => {
    editor.changed(changes);
    await browser.refresh();
    await history.refresh();
    await deleted.refresh();
  });
  return { actions, editor, history, deleted, live };
}
