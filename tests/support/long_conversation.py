"""The issue's long conversation: one 16 KB note read per message, and a model that answers
only from what it was sent (so a request that lost what it needs shows in the answer)."""

import re
from pathlib import Path
from typing import Any

from rojos.context.summaries import SUMMARY_INSTRUCTION
from tests.support.fake_provider import stream, text_chunks, tool_call_chunks

NOTES = 30
_FILLER = "line {n:04d}: the harbourmaster considered extraordinary circumstances again\n"
_FACT = re.compile(r"code word of note (\d\d) is ([A-Z]+-\d\d)")
_PATH = re.compile(r"notes/note-\d\d\.md")
FIRST_QUESTION = "What was the code word of the first note I asked about?"


def code_word(n: int) -> str:
    words = ["LANTERN", "HARBOUR", "ORCHID", "PEBBLE", "QUARTZ", "MEADOW", "TIMBER", "SAFFRON"]
    return f"{words[n % len(words)]}-{n:02d}"


def note_text(n: int) -> str:
    """About 16 KB: the note's code word first, then filler."""
    head = f"# Note {n:02d}\n\nThe code word of note {n:02d} is {code_word(n)}.\n\n"
    body = "".join(_FILLER.format(n=i) for i in range(215))
    return head + body


def notes_write(root: Path) -> None:
    (root / "notes").mkdir(parents=True, exist_ok=True)
    for n in range(1, NOTES + 1):
        (root / "notes" / f"note-{n:02d}.md").write_text(note_text(n))


def question(n: int) -> str:
    return f"Read notes/note-{n:02d}.md and tell me its code word."


def answer(n: int) -> str:
    return f"The code word of note {n:02d} is {code_word(n)}."


def _text(message: dict) -> str:
    content = message.get("content")
    return content if isinstance(content, str) else ""


def model(body: dict[str, Any]):
    """A model that reads its request: it calls the tool for a note it is asked about,
    answers from the tool result it was sent, summarises what its transcript says, and
    answers a question about the first note from whatever of it the request still holds."""
    messages = body["messages"]
    system = _text(messages[0]) if messages[0]["role"] == "system" else ""
    last = messages[-1]
    if system == SUMMARY_INSTRUCTION:
        facts = dict(_FACT.findall(_text(last)))
        lines = [f"- The code word of note {n} is {word}." for n, word in sorted(facts.items())]
        return stream(text_chunks("Notes read and answered:\n" + "\n".join(lines)))
    if last["role"] == "tool":
        found = _FACT.search(_text(last))
        reply = answer(int(found.group(1))) if found else "I could not read the note."
        return stream(text_chunks(reply, pieces=3))
    if _text(last) == FIRST_QUESTION:
        everything = "\n".join(_text(m) for m in messages)
        found = re.search(r"code word of note 01 is ([A-Z]+-\d\d)", everything)
        return stream(text_chunks(found.group(1) if found else "I do not know any more."))
    path = _PATH.search(_text(last))
    if path is None:
        return stream(text_chunks("Which note?"))
    return stream(tool_call_chunks([("get_text_content", {"path": path.group(0)})]))
