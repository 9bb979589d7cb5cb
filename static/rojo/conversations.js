// The conversation list: titles in full (two lines, the whole on hover), author and time,
// badges, rename and delete for editors and owners, older pages on demand, and search over
// the titles and messages of the user's projects. Badges change in one place, `badgeShow`,
// fed by the status poll here (or, later, by a live channel: give it the same pairs).

import { ApiError, getJson, request } from "./api.js";
import { icon } from "./icons.js";
import { visible, visibleText } from "./visible.js";

const POLL_MS = 3000;
const BADGES = {
  running: "Running",
  waiting: "Waiting for approval",
  failed: "Failed",
};

/** A time in the list, in the reader's time zone and one format (the page comes in UTC). */
export function showTime(time, date) {
  time.dateTime = date.toISOString();
  time.textContent = date.toLocaleString(undefined, {
    month: "short",
    day: "numeric",
    hour: "2-digit",
    minute: "2-digit",
  });
  time.title = date.toLocaleString();
}

function badgeOn(li, status) {
  li.dataset.status = status;
  let badge = li.querySelector(".badge");
  if (!status) {
    badge?.remove();
    return;
  }
  if (!badge) {
    badge = document.createElement("span");
    li.querySelector(".conversation-meta").append(badge);
  }
  badge.className = `badge badge-${status}`;
  badge.textContent = BADGES[status] ?? status;
}

function small(label, title, onClick) {
  const b = document.createElement("button");
  b.type = "button";
  b.className = "conversation-action";
  b.append(label);
  b.title = title;
  b.setAttribute("aria-label", title);
  b.addEventListener("click", (event) => {
    event.preventDefault();
    event.stopPropagation();
    onClick();
  });
  return b;
}

export class ConversationList {
  constructor(aside, { projectId, canWrite, nextCursor, currentId, username }) {
    this.username = username;
    this.aside = aside;
    this.list = aside.querySelector(".conversation-list");
    this.results = aside.querySelector(".search-results");
    this.search = aside.querySelector(".conversation-search");
    this.more = aside.querySelector(".more-conversations");
    this.projectId = projectId;
    this.canWrite = canWrite;
    this.cursor = nextCursor;
    this.currentId = currentId;
    for (const li of this.list.querySelectorAll("li[data-id]")) this.decorate(li);
    for (const time of this.list.querySelectorAll("time")) showTime(time, new Date(time.dateTime));
    this.more.addEventListener("click", () => this.loadMore());
    let typing = null;
    this.search.addEventListener("input", () => {
      clearTimeout(typing);
      typing = setTimeout(() => this.find(this.search.value), 200);
    });
    this.search.addEventListener("keydown", (event) => {
      if (event.key === "Escape") {
        this.search.value = "";
        this.find("");
      }
    });
    this.timer = setInterval(() => this.poll(), POLL_MS);
  }

  /** One row's badge: `status` is running, waiting, failed or "" (none). */
  badgeShow(id, status) {
    const li = this.list.querySelector(`li[data-id="${id}"]`);
    if (!li) return false;
    badgeOn(li, status);
    return true;
  }

  /** Ask for the badges of the rows shown (and of any conversation now running). */
  async poll() {
    if (document.hidden) return;
    const ids = [...this.list.querySelectorAll("li[data-id]")].map((li) => li.dataset.id);
    let statuses;
    try {
      const url = `/api/projects/${this.projectId}/conversations/status?ids=${ids.join(",")}`;
      statuses = (await getJson(url)).statuses;
    } catch {
      return; // the next poll tries again
    }
    let unknown = false;
    for (const [id, status] of Object.entries(statuses)) {
      if (!this.badgeShow(id, status)) unknown = true;
    }
    if (unknown) await this.refreshFirstPage();
  }

  /** Conversations started elsewhere since the page loaded: put the newest page's on top. */
  async refreshFirstPage() {
    const items = await getJson(`/api/projects/${this.projectId}/conversations`).catch(() => []);
    for (const item of [...items].reverse()) {
      if (!this.list.querySelector(`li[data-id="${item.id}"]`)) this.list.prepend(this.row(item));
    }
    this.list.querySelector(".empty")?.remove();
  }

  row(item) {
    const li = document.createElement("li");
    li.dataset.id = String(item.id);
    const link = document.createElement("a");
    link.href = `/projects/${this.projectId}/c/${item.id}/`;
    const title = document.createElement("span");
    title.className = "conversation-title";
    link.append(title);
    const meta = document.createElement("span");
    meta.className = "conversation-meta";
    const author = document.createElement("span");
    author.className = "conversation-author";
    author.append(...visible(item.author || "(deleted user)"));
    const time = document.createElement("time");
    showTime(time, new Date(item.updated));
    meta.append(author, " · ", time);
    li.append(link, meta);
    this.setTitle(li, item.title || "Untitled");
    li.dataset.status = item.status ?? "";
    if (item.pinned) li.dataset.pinned = "true";
    this.decorate(li);
    if (item.id === this.currentId) li.setAttribute("aria-current", "page");
    return li;
  }

  setTitle(li, text) {
    const link = li.querySelector("a");
    link.title = visibleText(text);
    link.querySelector(".conversation-title").replaceChildren(...visible(text));
  }

  /** A new conversation of this page's chat, on top and current. */
  addCurrent(id, title) {
    this.currentId = id;
    this.list.querySelector(".empty")?.remove();
    for (const li of this.list.querySelectorAll("li")) li.removeAttribute("aria-current");
    const li = this.row({ id, title, author: this.username, updated: new Date().toISOString(), status: "" });
    li.setAttribute("aria-current", "page");
    this.placeTop(li);
    this.badgeShow(id, "running");
  }

  /** At the head of the list: of the pinned ones if it is pinned, else just after them. */
  placeTop(li) {
    if (li.dataset.pinned) return this.list.prepend(li);
    const pinned = [...this.list.querySelectorAll("li[data-pinned]")].filter((row) => row !== li);
    if (pinned.length) pinned.at(-1).after(li);
    else this.list.prepend(li);
  }

  /** A turn in conversation `id`: it is the most recent now, and running. */
  touched(id) {
    const li = this.list.querySelector(`li[data-id="${id}"]`);
    if (!li) return;
    showTime(li.querySelector("time"), new Date());
    this.placeTop(li);
    this.badgeShow(id, "running");
  }

  decorate(li) {
    const meta = li.querySelector(".conversation-meta");
    if (li.dataset.status) badgeOn(li, li.dataset.status);
    if (!this.canWrite || li.querySelector(".conversation-actions")) return;
    const actions = document.createElement("span");
    actions.className = "conversation-actions";
    const pin = small(icon("pin"), "", () => this.pin(li));
    this.pinLabel(li, pin);
    actions.append(
      pin,
      small(icon("edit"), "Rename this conversation", () => this.rename(li)),
      small(icon("trash"), "Delete this conversation", () => this.confirmDelete(li)),
    );
    meta.after(actions);
  }

  pinLabel(li, pin) {
    const label = li.dataset.pinned ? "Unpin this conversation" : "Pin this conversation";
    pin.title = label;
    pin.setAttribute("aria-label", label);
  }

  async pin(li) {
    const pinned = !li.dataset.pinned;
    try {
      await request(`/api/conversations/${li.dataset.id}`, { method: "PATCH", json: { pinned } });
    } catch (error) {
      alert(error instanceof ApiError ? error.message : "Could not pin it.");
      return;
    }
    if (pinned) li.dataset.pinned = "true";
    else delete li.dataset.pinned;
    this.pinLabel(li, li.querySelector(".conversation-action"));
    this.placeTop(li);
  }

  rename(li) {
    const link = li.querySelector("a");
    const form = document.createElement("form");
    form.className = "conversation-rename";
    const box = document.createElement("input");
    box.value = link.title;
    box.maxLength = 200;
    box.setAttribute("aria-label", "New title");
    form.append(box);
    let sent = false;
    const done = () => form.replaceWith(link);
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      // Enter submits, and the blur that follows (or an alert's) would submit again.
      if (sent) return;
      sent = true;
      const title = box.value.trim();
      if (!title) return done();
      let renamed;
      try {
        const response = await request(`/api/conversations/${li.dataset.id}`, {
          method: "PATCH",
          json: { title },
        });
        renamed = (await response.json()).title;
      } catch (error) {
        done();
        alert(error instanceof ApiError ? error.message : "Could not rename it.");
        return;
      }
      // The link goes back into the row first: setTitle finds it there.
      done();
      this.setTitle(li, renamed);
    });
    box.addEventListener("keydown", (event) => {
      if (event.key === "Escape") done();
    });
    box.addEventListener("blur", () => form.requestSubmit());
    link.replaceWith(form);
    box.focus();
    box.select();
  }

  /** Ask first, in the row itself: what is deleted, and that the files stay. */
  confirmDelete(li) {
    if (li.querySelector(".conversation-confirm")) return;
    const box = document.createElement("div");
    box.className = "conversation-confirm";
    box.setAttribute("role", "alertdialog");
    box.setAttribute("aria-label", "Delete this conversation?");
    const running = li.dataset.status === "running" || li.dataset.status === "waiting";
    const text = document.createElement("p");
    text.textContent = `Delete this conversation and its messages?${running ? " Its reply is stopped first." : ""} The files it changed stay as they are.`;
    const yes = document.createElement("button");
    yes.type = "button";
    yes.className = "danger";
    yes.textContent = "Delete";
    const no = document.createElement("button");
    no.type = "button";
    no.textContent = "Cancel";
    no.addEventListener("click", () => box.remove());
    yes.addEventListener("click", async () => {
      yes.disabled = true;
      try {
        await request(`/api/conversations/${li.dataset.id}`, { method: "DELETE" });
      } catch (error) {
        box.remove();
        alert(error instanceof ApiError ? error.message : "Could not delete it.");
        return;
      }
      li.remove();
      if (Number(li.dataset.id) === this.currentId) location.assign(`/projects/${this.projectId}/`);
    });
    box.append(text, yes, no);
    li.append(box);
    yes.focus();
  }

  async loadMore() {
    if (!this.cursor) return;
    this.more.disabled = true;
    try {
      const url = `/api/projects/${this.projectId}/conversations?before=${encodeURIComponent(this.cursor)}`;
      const items = await getJson(url);
      for (const item of items) {
        if (!this.list.querySelector(`li[data-id="${item.id}"]`)) this.list.append(this.row(item));
      }
      this.cursor = items.length >= 50 ? items.at(-1).cursor : "";
    } finally {
      this.more.disabled = false;
      this.more.hidden = !this.cursor;
    }
  }

  /** Search as you type; an empty box shows the list again. */
  async find(query) {
    const searching = Boolean(query.trim());
    this.results.hidden = !searching;
    this.list.hidden = searching;
    this.more.hidden = searching || !this.cursor;
    if (!searching) return;
    let hits;
    try {
      hits = await getJson(`/api/search?q=${encodeURIComponent(query)}`);
    } catch {
      hits = null;
    }
    if (query !== this.search.value) return; // typed on meanwhile
    this.results.replaceChildren();
    if (!hits?.length) {
      const none = document.createElement("li");
      none.className = "empty";
      none.textContent = hits ? "Nothing found." : "The search failed; try again.";
      this.results.append(none);
      return;
    }
    for (const hit of hits) this.results.append(this.hitRow(hit, query));
  }

  hitRow(hit, query) {
    const li = document.createElement("li");
    const link = document.createElement("a");
    const where = hit.message ? `?message=${hit.message}&q=${encodeURIComponent(query)}` : "";
    link.href = `/projects/${hit.project}/c/${hit.conversation}/${where}`;
    const title = document.createElement("span");
    title.className = "conversation-title";
    title.append(...visible(hit.title || "Untitled"));
    const snippet = document.createElement("span");
    snippet.className = "search-snippet";
    snippet.append(...visible(hit.message ? hit.snippet : "(title)"));
    const project = document.createElement("span");
    project.className = "conversation-meta";
    project.append(...visible(hit.project_name));
    link.append(title, snippet, project);
    li.append(link);
    return li;
  }
}

/** Open at the message a search linked to (`?message=`): switch to a branch that has it if
 * need be, then scroll to its turn and highlight it. Once: the branches the reader switches
 * to afterwards are theirs. */
let revealSwitched = false;
let revealed = false;

export async function messageReveal(chat, detail) {
  const params = new URLSearchParams(location.search);
  const wanted = Number(params.get("message"));
  if (!wanted || revealed) return;
  const messages = detail.messages;
  const index = messages.findIndex((m) => m.id === wanted);
  if (index < 0) {
    if (revealSwitched) return;
    revealSwitched = true;
    try {
      const json = { message: wanted };
      await request(`/api/conversations/${chat.conversationId}/branch`, { method: "POST", json });
    } catch {
      return; // a reply runs, or the message is gone: the conversation shows as it is
    }
    await chat.open(chat.conversationId); // "opened" comes again, with the message there
    return;
  }
  revealed = true;
  const asked = messages.slice(0, index + 1).findLast((m) => m.role === "user");
  const bubble = chat.log.element.querySelector(`.bubble.user[data-message="${asked?.id}"]`);
  if (!bubble) return;
  let target = bubble;
  if (messages[index].role !== "user") {
    const words = (params.get("q") ?? "").toLowerCase().split(/\s+/).filter(Boolean);
    for (let node = bubble.nextElementSibling; node; node = node.nextElementSibling) {
      if (node.classList.contains("user")) break;
      const text = (node.text ?? node.textContent ?? "").toLowerCase();
      if (node.classList.contains("assistant") && words.every((w) => text.includes(w))) {
        target = node;
        break;
      }
    }
  }
  target.classList.add("search-hit");
  target.scrollIntoView({ block: "center" });
}
