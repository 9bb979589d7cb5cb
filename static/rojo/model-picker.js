// The rojo bar's model picker: which of the rojo's models this conversation asks, a Refresh of
// the provider's list for a rojo that offers any model it lists, a "Regenerate with" choice
// beside Regenerate (a branch beside the first answer), and each reply's model named where it
// is not the conversation's. The window meter follows: the usage is asked for again.

import { ApiError, getJson, request } from "./api.js";
import { visibleText } from "./visible.js";

function element(tag, className, text = "") {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text) node.textContent = text;
  return node;
}

export class ModelPicker {
  /** `holder`: the rojo bar's `.model-choice`; `rojos`: the page's rojos (each with `models`,
   * its default `model` first, and `anyListed`); `canPick`: this page may change the
   * conversation's model. */
  constructor(holder, { chat, rojos, canPick }) {
    this.holder = holder;
    this.chat = chat;
    this.rojos = rojos;
    this.rojo = null;
    this.conversationModel = ""; // empty: the rojo's default
    this.regenerated = null; // the model a "Regenerate with" asked, until its reply is drawn
    const label = element("label", "", "Model");
    label.htmlFor = "model-picker";
    this.select = element("select");
    this.select.id = "model-picker";
    this.refresh = element("button", "model-refresh", "Refresh");
    this.refresh.type = "button";
    this.refresh.title = "Ask the provider for its models again";
    this.select.disabled = !canPick;
    holder.append(label, this.select, this.refresh);
    this.select.addEventListener("change", () => this.pick(this.select.value));
    this.refresh.addEventListener("click", () => this.refreshList());
    chat.addEventListener("opened", (event) => this.opened(event.detail));
    chat.addEventListener("regenerate-offered", (event) => this.offerRegenerate(event.detail));
    chat.addEventListener("turn-finished", () => this.turnFinished());
  }

  /** The rojo whose models are offered; a new rojo starts on its default. */
  show(rojo, conversationModel = "") {
    this.rojo = rojo ?? null;
    const models = rojo?.models ?? [];
    // A model the rojo no longer offers: its default answers (the server's choice too).
    this.conversationModel = models.includes(conversationModel) ? conversationModel : "";
    this.chat.model = this.conversationModel;
    this.holder.hidden = !rojo || (models.length < 2 && !rojo.anyListed);
    this.refresh.hidden = !rojo?.anyListed;
    this.fill();
  }

  /** The model the conversation asks: its own, else the rojo's default. */
  get current() {
    return this.conversationModel || this.rojo?.model || "";
  }

  fill() {
    const models = this.rojo?.models ?? [];
    const wanted = models.includes(this.current) ? this.current : models[0];
    this.select.replaceChildren(
      ...models.map((name) => {
        const option = element("option", "", visibleText(name));
        option.value = name;
        if (name === this.rojo.model) option.textContent += " (default)";
        return option;
      }),
    );
    if (wanted !== undefined) this.select.value = wanted;
  }

  /** A pick in the rojo bar: a new conversation sends it with its first message; an open one
   * stores it now (its next turns ask it), and the meter shows its window. */
  async pick(name) {
    const stored = name === this.rojo?.model ? "" : name;
    const id = this.chat.conversationId;
    if (!id) {
      this.conversationModel = stored;
      this.chat.model = stored;
      return;
    }
    try {
      await request(`/api/conversations/${id}/model`, { method: "POST", json: { model: name } });
    } catch (error) {
      this.select.value = this.current;
      this.chat.addError(error instanceof ApiError ? error.message : "Could not change the model.");
      return;
    }
    this.conversationModel = stored;
    this.chat.model = stored;
    this.meterRefresh(id);
    this.label(); // the replies now named are those of another model than this one
  }

  meterRefresh(id) {
    getJson(`/api/conversations/${id}/usage`)
      .then((usage) => this.chat.dispatchEvent(new CustomEvent("usage", { detail: usage })))
      .catch(() => {}); // the meter is a nicety: it catches up after the next reply
  }

  async refreshList() {
    if (!this.rojo) return;
    this.refresh.disabled = true;
    try {
      const listed = await (await request(`/api/rojos/${this.rojo.id}/models/refresh`, { method: "POST" })).json();
      this.rojo.models = listed.models;
      this.fill();
    } catch (error) {
      this.chat.addError(error instanceof ApiError ? error.message : "The model list could not be fetched.");
    } finally {
      this.refresh.disabled = false;
    }
  }

  opened(detail) {
    const rojo = this.rojos.find((r) => r.id === detail.rojo_id) ?? this.rojo;
    this.show(rojo, detail.model ?? "");
    this.turnModels = {}; // user message id -> the model of its reply
    let turn = null;
    for (const message of detail.messages ?? []) {
      if (message.role === "user") turn = message.id;
      else if (message.role === "assistant" && message.model && turn !== null) {
        this.turnModels[turn] ??= message.model;
      }
    }
    this.label();
  }

  /** Name the model on each reply written by another model than the conversation's. */
  label() {
    const log = this.chat.log.element;
    for (const old of log.querySelectorAll(".reply-model")) old.remove();
    let model = null;
    for (const node of log.children) {
      if (node.matches(".bubble.user")) model = this.turnModels?.[node.dataset.message] ?? null;
      else if (node.matches(".bubble.assistant") && model && model !== this.current) {
        const name = element("span", "reply-model", visibleText(model));
        name.title = "The model that wrote this reply";
        node.prepend(name);
      }
    }
  }

  /** Beside Regenerate: the same question again, answered by another of the rojo's models. */
  offerRegenerate({ actions, asked }) {
    const others = (this.rojo?.models ?? []).filter((name) => name !== this.current);
    if (!others.length || !asked?.dataset.message) return;
    const choice = element("select", "regenerate-model");
    choice.setAttribute("aria-label", "Regenerate with another model");
    choice.append(element("option", "", "Regenerate with…"));
    for (const name of others) {
      const option = element("option", "", visibleText(name));
      option.value = name;
      choice.append(option);
    }
    choice.addEventListener("change", () => {
      const model = choice.value;
      if (!model || this.chat.busy) return;
      this.regenerated = { model, asked: Number(asked.dataset.message) };
      this.chat.send({ text: asked.text ?? "", replace: Number(asked.dataset.message), before: asked, model });
    });
    actions.append(choice);
  }

  /** A reply of a "Regenerate with": named with its model once it is drawn. */
  turnFinished() {
    const done = this.regenerated;
    this.regenerated = null;
    if (!done) return;
    const asked = [...this.chat.log.element.querySelectorAll(".bubble.user[data-message]")].at(-1);
    if (!asked) return;
    this.turnModels = { ...this.turnModels, [asked.dataset.message]: done.model };
    this.label();
  }
}
