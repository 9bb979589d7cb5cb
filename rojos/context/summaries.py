"""Summarising a conversation's oldest turns, by the rojo's own model, in a request of its own.

The turns go to the model as one transcript (each tool result cut to its start: the files
can be read again) after an instruction written for the job: keep what the rest of the work
depends on. A transcript too long for one request is summarised in parts, each part with
the summary so far. The summary is stored as a message of its own kind (role "summary",
`extra["until"]`: the position of the first message it does not cover), after the turn
that needed it; the stored turns stay whole.
"""

from rojos.models import Message
from rojos.provider.request import undone_note

SUMMARY_INSTRUCTION = """\
You write the working memory of an assistant that works on a project's files with a user. \
The conversation has grown too long for the model's context window, so its earlier part \
will be replaced by your summary. The assistant will go on from your summary alone.

Keep, as short factual notes:
- what the user asked for and every value, name, number or preference the user gave;
- decisions made, and why;
- each file path read, created, changed, moved or deleted, with the facts from it that \
were used or reported (names, numbers, code words, conclusions);
- the answers the assistant gave, with their key facts;
- open tasks, unanswered questions, and what was about to happen next.
Leave out greetings, and file contents that can simply be read again.
Write at most 400 words, in the conversation's language. Answer with the summary only."""

# Each tool result as the summariser sees it: its start (the file itself can be read again).
RESULT_CHARS = 1_500


def _line(message: Message, calls: dict[str, dict]) -> str:
    text = message.content or ""
    if message.role == Message.Role.USER:
        return f"User: {text}"
    if message.role == Message.Role.TOOL:
        shown = text if len(text) <= RESULT_CHARS else f"{text[:RESULT_CHARS]}… [cut]"
        shown += undone_note(message)
        call = calls.get(message.tool_call_id) or {}
        arguments = (call.get("function") or {}).get("arguments") or "{}"
        return f"Result of {message.name}({arguments}):\n{shown}"
    parts = [f"Assistant: {text}"] if text else []
    for call in message.tool_calls or ():
        function = call.get("function") or {}
        parts.append(f"Assistant called {function.get('name')}({function.get('arguments')})")
    return "\n".join(parts)


def transcript_parts(messages: list[Message], part_chars: int) -> list[str]:
    """The messages as transcript text, in parts of at most `part_chars` characters."""
    calls = {c["id"]: c for m in messages for c in m.tool_calls or ()}
    parts: list[str] = []
    current: list[str] = []
    size = 0
    for message in messages:
        line = _line(message, calls)
        if not line:
            continue
        if len(line) > part_chars:
            line = line[: part_chars - 10] + "… [cut]"
        if current and size + len(line) > part_chars:
            parts.append("\n\n".join(current))
            current, size = [], 0
        current.append(line)
        size += len(line) + 2
    if current:
        parts.append("\n\n".join(current))
    return parts


def summary_messages(part: str, previous: str | None) -> list[dict]:
    """The messages of one summary request."""
    earlier = f"The summary so far:\n{previous}\n\n" if previous else ""
    return [
        {"role": "system", "content": SUMMARY_INSTRUCTION},
        {
            "role": "user",
            "content": f"{earlier}The conversation to summarise:\n\n{part}\n\n"
            "Write the summary now"
            + (" (one summary covering the summary so far and these turns)." if earlier else "."),
        },
    ]


def summary_extra(until: int, messages: list[Message]) -> dict:
    """What a stored summary records: where its cover ends, and what it covers."""
    return {"until": until, "summarised": len(messages), "from": messages[0].position}
