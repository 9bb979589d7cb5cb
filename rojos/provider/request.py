"""How a conversation's stored history becomes a chat-completions request.

Stored messages keep what the model sent; what providers accept back differs (PROVIDERS.md,
"Sending history back" and "Requests"), so every request-side quirk is handled here, in one
form that all of them take, with no branching on the provider's name:
- only `model`, `messages`, `tools`, `stream` and `stream_options` (usage in the stream),
  plus the rojo's own options; `stream_options` is dropped for a provider that refused it;
  `parallel_tool_calls` only where the model's self-test found parallel calls broken (false)
  or coming only when asked for (true) (rojos.models.capabilities);
- tool-call ids of 9 letters and digits (Mistral);
- each call's arguments as a JSON object string, "{}" rather than "" (Gemini parses them);
- a call's name as providers validate it (^[a-zA-Z0-9_-]{1,64}$, OpenAI): one the model
  made up outside it goes back as `unknown_tool`, else every later request is refused;
- Gemini's thought signatures back to the model that made them, and to no other;
- stored reasoning with its tool calls only where the provider needs it, within the tool
  loop or (DeepSeek) after it (`reasoning_back_field`; Mistral answers 422 to it);
- a call's result with a note of its undo, once the user undid what it changed;
- no null or empty content beside tool calls (llama-cpp-python, some gateways);
- alternating roles with no empty assistant message (vLLM's and llama.cpp's templates).
The stream reader, the other half of speaking to a provider, is `provider.py`.
"""

import hashlib
import json

from rojos.errors import TurnError
from rojos.models import Message, Rojo
from rojos.provider.attachments import attachments_wire
from rojos.provider.completion import Completion
from rojos.provider.images import image_parts
from rojos.tool_names import wire_name_valid

# Message-level fields a provider needs back (Gemini's thought signatures); the rest stay stored.
_SENT_BACK_EXTRA = ("extra_content",)
# What a user message may attach: files' text, images, uploaded PDFs' text.
_ATTACHED = ("attachments", "images", "pdfs")
_BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
# What goes back for a name outside that: the call's result already says no such tool.
UNKNOWN_TOOL = "unknown_tool"


def wire_call_id(stored_id: str) -> str:
    """The id sent to providers for a stored tool-call id: 9 letters and digits, stable.

    Mistral rejects any other shape; hashing maps every stored id the same way each time,
    so an assistant's call and its tool message always agree.
    """
    number = int.from_bytes(hashlib.sha256(stored_id.encode()).digest()[:8], "big")
    chars = []
    for _ in range(9):
        number, digit = divmod(number, 62)
        chars.append(_BASE62[digit])
    return "".join(chars)


def _wire_arguments(arguments: str | None) -> str:
    """Arguments as a JSON object string: "{}" for none, and for ones that were not valid.

    The stored call keeps what the model sent (its tool result explains what was wrong);
    providers that parse history (Gemini) would reject the whole request otherwise.
    """
    text = (arguments or "").strip()
    try:
        return text if isinstance(json.loads(text), dict) else "{}"
    except ValueError:
        return "{}"


def _wire_name(name: str) -> str:
    """A stored call's name as providers accept it: a name the model made up with spaces,
    dots or past 64 characters is stored and shown as it came, but sent back as
    UNKNOWN_TOOL (OpenAI refuses a request whose history holds it, and so each later one)."""
    return name if wire_name_valid(name) else UNKNOWN_TOOL


def _call_to_wire(call: dict, sent_back: tuple[str, ...]) -> dict:
    function = call.get("function") or {}
    wire = {
        "id": wire_call_id(call["id"]),
        "type": "function",
        "function": {
            "name": _wire_name(function.get("name") or ""),
            "arguments": _wire_arguments(function.get("arguments")),
        },
    }
    for key in sent_back:
        if key in call:
            wire[key] = call[key]
    return wire


def sent_back_extra(completion_extra: dict, tool_calls: list[dict], model: str) -> dict:
    """A reply's extra fields to store: with the model's name when it must get some back.

    Only the model that signed them reads Gemini's thought signatures; a conversation
    continued with another rojo (Mistral refuses unknown fields) does not get them.
    """
    if any(key in item for item in (completion_extra, *tool_calls) for key in _SENT_BACK_EXTRA):
        return {**completion_extra, "model": model}
    return completion_extra


# The fields a reply's reasoning may go back in (what the reply came in, where it did).
_REASONING_FIELDS = frozenset({"reasoning_content", "reasoning"})
# On a message whose reasoning goes back within its tool loop only: `assembled` takes the
# reasoning off it before the last user message, and this mark off every message.
_LOOP_ONLY = "_reasoning_loop_only"


def reasoning_back_field(rule: str, shape: str | None) -> tuple[str | None, bool]:
    """The field a reply's reasoning goes back in with its tool calls (None: never), and
    whether it goes in every later request too, not only within its tool loop.

    By the shape it came in (docs/providers.md, "Reasoning"): a `reasoning` field (Ollama,
    OpenRouter) goes back within the loop, where the harmony models Ollama serves need it;
    a `reasoning_content` field (DeepSeek, vLLM, LM Studio) in every later request, as
    DeepSeek's thinking mode answers 400 without it (the templates of vLLM's and LM Studio's
    models drop what they do not need); `<think>` tags and Mistral's thinking parts never
    (Mistral answers 422 to reasoning in history). A rojo's rule may say within the loop
    (gpt-oss on vLLM, Qwen3 on llama.cpp) or never.
    """
    if shape is None or rule == Rojo.ReasoningBack.NEVER:
        return None, False
    if rule == Rojo.ReasoningBack.TOOL_LOOP:
        return (shape if shape in _REASONING_FIELDS else "reasoning_content"), False
    if shape == "reasoning_content":
        return shape, True
    return ("reasoning" if shape == "reasoning" else None), False


def reasoning_extra(rojo: Rojo, completion: Completion, *, model: str) -> dict:
    """What to store with a reply for its reasoning to go back with its calls (the field,
    whether after its tool loop too, and the model that wrote it: no other model gets it)."""
    if not (completion.reasoning and completion.tool_calls):
        return {}
    field, kept = reasoning_back_field(rojo.reasoning_back, completion.reasoning_shape)
    if field is None:
        return {}
    return {"reasoning_back": field, "reasoning_kept": kept, "model": model}


def undone_paths(message: Message) -> str:
    """What the undo of a stored tool message's call put back, in words ("" when none):
    "a.txt was put back as it was before this call."."""
    undone = (message.extra or {}).get("undone")
    if not undone:
        return ""
    paths = ", ".join(undone)
    were, state = ("were", "they were") if len(undone) > 1 else ("was", "it was")
    return f"{paths} {were} put back as {state} before this call."


def undone_note(message: Message) -> str:
    """What a stored tool message adds for the model once the user undid the call's change
    ("" when not): the page shows the call undone, and the model would otherwise go on
    from files that are no longer as the result says."""
    put_back = undone_paths(message)
    if not put_back:
        return ""
    return f"\n\n[The user undid this change afterwards: {put_back}]"


def message_to_wire(message: Message, model: str | None = None) -> dict:
    """One stored message as a provider expects it back, for `model` (None: any)."""
    if message.role == Message.Role.TOOL:
        return {
            "role": "tool",
            "tool_call_id": wire_call_id(message.tool_call_id),
            "content": (message.content or "") + undone_note(message),
        }
    wire: dict = {"role": message.role}
    extra = message.extra or {}
    signed_by = extra.get("model")
    sent_back = _SENT_BACK_EXTRA if None in (signed_by, model) or signed_by == model else ()
    if message.tool_calls:
        # Content is left out rather than null or "": some local servers fail on null,
        # and some gateways reject an empty text block.
        if message.content:
            wire["content"] = message.content
        wire["tool_calls"] = [_call_to_wire(call, sent_back) for call in message.tool_calls]
        field = extra.get("reasoning_back")
        if field in _REASONING_FIELDS and message.reasoning and signed_by == model:
            wire[field] = message.reasoning
            if not extra.get("reasoning_kept"):
                wire[_LOOP_ONLY] = True
    elif message.role == Message.Role.USER and any(extra.get(k) for k in _ATTACHED):
        attached = [*(extra.get("attachments") or []), *(extra.get("pdfs") or [])]
        text = attachments_wire(message.content or "", attached)
        wire["content"] = image_parts(text, extra["images"]) if extra.get("images") else text
    else:
        wire["content"] = message.content or ""
    for key in sent_back:
        if key in extra:
            wire[key] = extra[key]
    return wire


def request_messages(
    messages: list[Message], *, system_prompt: str = "", model: str | None = None
) -> list[dict]:
    """The request's messages: the rojo's system prompt, then the history as stored."""
    items = [message_to_wire(m, model) for m in messages if m.role != Message.Role.SUMMARY]
    return assembled(items, system_prompt=system_prompt)


def assembled(items: list[dict], *, system_prompt: str = "") -> list[dict]:
    """The system prompt, then the messages as providers' templates take them.

    Roles must alternate for the chat templates of vLLM and llama.cpp (Mistral's, Gemma's),
    and Mistral refuses an assistant message with neither text nor calls: such a message
    (a reply that said nothing) is left out, and user messages in a row (the turn between
    them failed) go as one. Reasoning that goes back within its tool loop only is taken off
    the messages before the last user message.
    """
    wire = [{"role": "system", "content": system_prompt}] if system_prompt else []
    last_user = max((i for i, item in enumerate(items) if item["role"] == "user"), default=-1)
    for i, item in enumerate(items):
        if _LOOP_ONLY in item:
            dropped = {_LOOP_ONLY, *_REASONING_FIELDS} if i < last_user else {_LOOP_ONLY}
            item = {k: v for k, v in item.items() if k not in dropped}
        if item["role"] == "assistant" and not (item.get("content") or item.get("tool_calls")):
            continue
        if item["role"] == "user" and wire and wire[-1]["role"] == "user":
            wire[-1] = {**wire[-1], "content": _joined(wire[-1]["content"], item["content"])}
            continue
        wire.append(item)
    return wire


def _joined(first: str | list, second: str | list) -> str | list:
    """Two user messages' contents as one: text, or parts when either has images."""
    if isinstance(first, str) and isinstance(second, str):
        return f"{first}\n\n{second}"
    as_parts = [
        c if isinstance(c, list) else [{"type": "text", "text": c}] for c in (first, second)
    ]
    return as_parts[0] + as_parts[1]


def build_request(
    rojo: Rojo,
    stored: list[Message],
    tools: list[dict],
    *,
    messages: list[dict] | None = None,
    model=None,
) -> dict:
    """Only model, messages, tools and stream, plus what the rojo itself configures.

    `messages` are the request's when the history was compacted to fit
    (rojos.context.compaction); else the whole stored history, `stored`, is sent.

    The rojo's request options are merged at the top of the body and win over everything
    but the model, the messages, the tools and streaming, which the loop depends on. Usage
    is asked for in the stream (its last chunk) unless the provider refused that before;
    `parallel_tool_calls` where the model's self-test found parallel calls broken (false) or
    coming only when asked for (true). `model` is the model in use
    (rojos.context.model_choice.ModelInUse: its `name` and `stream_usage_refused`); None: the
    rojo's default.
    """
    options = rojo.request_options or {}
    if not isinstance(options, dict):  # stored before they were validated
        raise TurnError(
            f"The rojo {rojo.name!r} has request options that are not a JSON object; "
            "an administrator can fix them in the admin."
        )
    request: dict = dict(options)
    if rojo.temperature is not None:
        request["temperature"] = rojo.temperature
    if rojo.reasoning_effort and not {"reasoning_effort", "reasoning"}.intersection(options):
        # The one field OpenAI, Gemini, vLLM, Ollama, LM Studio and OpenRouter all take.
        request["reasoning_effort"] = rojo.reasoning_effort
    name = rojo.model if model is None else model.name
    refused = rojo.stream_usage_refused if model is None else model.stream_usage_refused
    if messages is None:
        messages = request_messages(stored, system_prompt=rojo.system_prompt, model=name)
    request.update(model=name, messages=messages, stream=True)
    if not refused:
        request.setdefault("stream_options", {"include_usage": True})
    if tools:
        request["tools"] = tools
        # Two calls in one response are asked for only where the self-test saw them work
        # (and only came when asked); where they come one at a time or run together, the
        # provider is told not to make them.
        found = rojo.capabilities(name)
        tell = found.parallel_calls is False or (found.parallel_calls and found.parallel_asked)
        if tell and found.parallel_option is not False:
            request.setdefault("parallel_tool_calls", found.parallel_calls)
    return request
