"""Fitting a conversation's request into the model's window, in the request only.

Stored messages stay whole; what is sent is made smaller, in this order and only as much as
needed to fit the prompt budget:
a. old tool results (not the current turn's) become a one-line stub saying what they were
   and how to get them again, oldest first;
b. the oldest turns are summarised (by `rojos/context/summaries.py`, a model call the caller
   makes): from then on the request sends the system prompt with the summary, and the
   turns after it;
c. what still does not fit is cut, largest first, each cut saying how to read the rest.
The system prompt (with the project's instructions after it) comes first and the latest
user message last, always. Assistant calls
and their results stay together (whole turns are summarised), so every call sent is
answered. Sizes are counted in characters: the caller turns the token budget into them
with the rojo's calibrated ratio.
"""

import json
from dataclasses import dataclass, field

from rojos.context.window import item_chars
from rojos.models import Message
from rojos.provider.request import assembled, message_to_wire, undone_note, undone_paths

# A result smaller than this is left as it is: its stub would save next to nothing.
_STUB_MIN_CHARS = 400
# Cut items keep at least this much of their text.
_CUT_MIN_CHARS = 300
# After a summary the kept turns should fill at most this share of the budget, so that the
# next steps do not need another summary at once.
_KEPT_SHARE = 0.6
# Room kept in the budget for the summary itself.
SUMMARY_MAX_CHARS = 6_000


@dataclass
class Compaction:
    """The request's messages, their size, and what the caller must summarise first, if any."""

    messages: list[dict]
    chars: int
    summarise: list[Message] = field(default_factory=list)
    stubbed: int = 0
    cut: int = 0


def latest_summary(messages: list[Message]) -> Message | None:
    """The conversation's latest summary message, if any."""
    for message in reversed(messages):
        if message.role == Message.Role.SUMMARY:
            return message
    return None


def system_text(
    system_prompt: str, summary: Message | None, instructions: str = "", undos: str = ""
) -> str:
    """The system message: the rojo's prompt, the project's instructions
    (rojos.context.instructions), then the summary of the earlier conversation and the
    undos of calls it covers (`covered_undos`)."""
    block = ""
    if summary is not None:
        block = (
            "Summary of the earlier part of this conversation (its messages are left out to "
            f"fit the context window):\n{summary.content or ''}"
        )
    return "\n\n".join(part for part in (system_prompt, instructions, block, undos) if part)


def covered_undos(covered: list[Message]) -> str:
    """The changes the user undid of calls a summary covers ("" when none): an undo marks
    the call's result, which requests no longer send once it is summarised, and a summary
    written before the undo says the files hold what the calls wrote. (One written after
    says it too: then this repeats it.)"""
    calls = {c["id"]: c for m in covered for c in m.tool_calls or ()}
    lines = [
        f"- {_call_label(calls.get(m.tool_call_id), m.name)}: {put_back}"
        for m in covered
        if m.role == Message.Role.TOOL and (put_back := undone_paths(m))
    ]
    if not lines:
        return ""
    return (
        "Changes the user undid afterwards, of calls the summary above covers (whatever it "
        "says, the files are as they were before each of these calls):\n" + "\n".join(lines)
    )


def _call_label(call: dict | None, name: str) -> str:
    """`get_text_content docs/a.md`: the tool and its main argument, short."""
    arguments = ((call or {}).get("function") or {}).get("arguments") or ""
    try:
        args = json.loads(arguments)
    except ValueError:
        args = None
    if isinstance(args, dict):
        main = args.get("path") or next((v for v in args.values() if isinstance(v, str)), "")
        if main:
            main = main if len(main) <= 80 else main[:79] + "…"
            return f"{name} {main}"
    return name


def stub(message: Message, call: dict | None) -> str:
    """The one line that stands in for an old tool result (with the note of its undo, if
    the user undid the call's change: the model must not go on from what it wrote)."""
    size = len(message.content or "")
    return (
        f"[{_call_label(call, message.name)}: {size:,} characters, left out to fit the "
        "context window; call the tool again if needed]"
    ) + undone_note(message)


def cut_text(text: str, keep: int, message: Message, call: dict | None) -> str:
    """The first `keep` characters of `text`, with a note on how to read the rest."""
    kept = text[:keep]
    if message.role == Message.Role.TOOL:
        line = kept.count("\n") + 1
        if message.name == "get_text_content":
            how = (
                f"read the rest with get_text_content(offset={line}, limit=…) on the same path "
                "(offset is the first line to read)"
            )
        else:
            how = "call the tool again asking for less at a time"
        return (
            f"{kept}\n[cut to fit the context window: {keep:,} of {len(text):,} characters "
            f"shown, up to line {line}; {how}]"
        )
    return f"{kept}\n[cut to fit the context window: {keep:,} of {len(text):,} characters shown]"


def _turn_starts(messages: list[Message]) -> list[int]:
    return [i for i, m in enumerate(messages) if m.role == Message.Role.USER]


def compact(
    messages: list[Message],
    *,
    system_prompt: str,
    model: str | None,
    budget_chars: int,
    fixed_chars: int = 0,
    summaries: bool = True,
    instructions: str = "",
) -> Compaction:
    """The request's messages for `messages`, fitted into `budget_chars` (see the module).

    `fixed_chars` is what the request holds besides its messages (the tool definitions);
    `instructions`, the project's, go in the system message after the prompt and count as it.
    With `summaries`, a history that stubs cannot fit asks for the oldest turns to be
    summarised (`Compaction.summarise`) and is sent stubbed and cut meanwhile.
    """
    summary = latest_summary(messages)
    start = 0
    if summary is not None:
        until = (summary.extra or {}).get("until", summary.position)
        start = next((i for i, m in enumerate(messages) if m.position >= until), len(messages))
    tail = [m for m in messages[start:] if m.role != Message.Role.SUMMARY]
    system = system_text(system_prompt, summary, instructions, covered_undos(messages[:start]))
    items = [message_to_wire(m, model) for m in tail]
    sizes = [item_chars(item) for item in items]
    fixed = fixed_chars + (item_chars({"content": system}) if system else 0)
    total = fixed + sum(sizes)
    result = Compaction(messages=[], chars=total)
    starts = _turn_starts(tail)
    current = starts[-1] if starts else 0  # the current turn: its results are never stubbed
    calls = {c["id"]: c for m in tail for c in m.tool_calls or ()}

    if total > budget_chars:  # a. old tool results (and long call arguments) become stubs
        for i in range(current):
            if total <= budget_chars:
                break
            message = tail[i]
            if message.role == Message.Role.TOOL and len(message.content or "") >= _STUB_MIN_CHARS:
                items[i] = {**items[i], "content": stub(message, calls.get(message.tool_call_id))}
            elif sizes[i] >= _STUB_MIN_CHARS and items[i].get("tool_calls"):
                items[i] = _arguments_cut(items[i], 0)
            else:
                continue
            total, sizes[i] = total - sizes[i] + item_chars(items[i]), item_chars(items[i])
            result.stubbed += 1

    if total > budget_chars and summaries:  # b. the oldest turns, summarised by the caller
        result.summarise = _to_summarise(tail, sizes, starts, fixed, budget_chars)

    if total > budget_chars:  # c. what is still too big is cut, largest first
        total, result.cut = _cut(tail, items, sizes, total, budget_chars, calls)

    result.messages = assembled(items, system_prompt=system)
    result.chars = total
    return result


def _to_summarise(
    tail: list[Message], sizes: list[int], starts: list[int], fixed: int, budget: int
) -> list[Message]:
    """The fewest oldest whole turns whose summary leaves the rest within the kept share."""
    target = budget * _KEPT_SHARE - SUMMARY_MAX_CHARS - fixed
    for boundary in starts[1:]:  # never the current turn: it starts at starts[-1]
        if sum(sizes[boundary:]) <= target:
            return tail[:boundary]
    return tail[: starts[-1]] if len(starts) > 1 else []


def _cut(
    tail: list[Message],
    items: list[dict],
    sizes: list[int],
    total: int,
    budget: int,
    calls: dict[str, dict],
) -> tuple[int, int]:
    """Cut the largest texts until the request fits, or nothing is left to cut.

    Each is cut by what the request is over, so no more than needed; the request's size
    and the number of texts cut are returned.
    """
    cut: set[int] = set()
    stuck: set[int] = set()  # cut as far as they go: cutting again would change nothing
    while total > budget:
        candidates = [
            i
            for i, item in enumerate(items)
            if i not in stuck and _cuttable(item) > _CUT_MIN_CHARS * 2
        ]
        if not candidates:
            break
        i = max(candidates, key=sizes.__getitem__)
        message, item = tail[i], items[i]
        keep = max(_CUT_MIN_CHARS, _cuttable(item) - (total - budget) - 400)
        if item.get("tool_calls"):
            items[i] = _arguments_cut(item, keep)
        else:
            text = cut_text(message.content or "", keep, message, calls.get(message.tool_call_id))
            items[i] = {**item, "content": text + undone_note(message)}  # kept through the cut
        if item_chars(items[i]) >= sizes[i]:
            stuck.add(i)
        total, sizes[i] = total - sizes[i] + item_chars(items[i]), item_chars(items[i])
        cut.add(i)
    return total, len(cut)


def _cuttable(item: dict) -> int:
    """The characters of an item that a cut can take: its text, or its calls' arguments."""
    if item.get("tool_calls"):
        return sum(len(call["function"]["arguments"]) for call in item["tool_calls"])
    content = item.get("content")
    return len(content) if isinstance(content, str) else 0


def _arguments_cut(item: dict, keep: int) -> dict:
    """An assistant item whose calls' long string arguments (a file written whole, say) keep
    their first `keep` characters and say how much is left out; still valid JSON objects."""
    calls = []
    for call in item["tool_calls"]:
        arguments = json.loads(call["function"]["arguments"])  # a JSON object: wire form
        share = keep // max(_strings(arguments), 1)
        arguments = _strings_cut(arguments, share)
        function = {**call["function"], "arguments": json.dumps(arguments, ensure_ascii=False)}
        calls.append({**call, "function": function})
    return {**item, "tool_calls": calls}


def _strings(value) -> int:
    """How many strings `value` holds, at any depth (an edit's old and new texts are in a
    list of objects)."""
    if isinstance(value, str):
        return 1
    if isinstance(value, dict):
        return sum(_strings(inner) for inner in value.values())
    if isinstance(value, list):
        return sum(_strings(inner) for inner in value)
    return 0


def _strings_cut(value, share: int):
    """`value` with each string longer than `share` (and 200) cut to it, at any depth."""
    if isinstance(value, str):
        if len(value) <= max(share, 200):
            return value
        return (
            f"{value[:share]}… [{len(value):,} characters; the rest left out to fit the "
            "context window]"
        )
    if isinstance(value, dict):
        return {key: _strings_cut(inner, share) for key, inner in value.items()}
    if isinstance(value, list):
        return [_strings_cut(inner, share) for inner in value]
    return value
