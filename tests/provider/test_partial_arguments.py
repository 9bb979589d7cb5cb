"""The scanner of streaming tool-call arguments: paths and written text from fragments cut
anywhere, mid-string and mid-escape included, and never an exception; and the deltas it
feeds, over each provider's way of streaming parallel calls."""

import json

import pytest

from rojos.agent.tool_call_deltas import ToolCallDeltas
from rojos.provider.accumulator import StreamAccumulator
from rojos.provider.partial_arguments import ArgumentScanner
from tests.support.fake_provider import tool_call_chunks

WRITE = {"path": 'docs/ä "quoted"\\x.md', "text": "line 1\n\ttab é 😀 \u202e end\\"}
EDIT = {
    "path": "a.txt",
    "edits": [
        {"old_text": "old", "new_text": "first\n"},
        {"old_text": "text", "new_text": "second 😀"},
    ],
}


def scan(text: str, cuts: list[int]) -> tuple[ArgumentScanner, str]:
    scanner = ArgumentScanner()
    taken = []
    last = 0
    for cut in [*cuts, len(text)]:
        scanner.feed(text[last:cut])
        taken.append(scanner.take_text())
        last = cut
    return scanner, "".join(taken)


@pytest.mark.parametrize("ensure_ascii", [True, False])
def test_every_cut_gives_the_path_and_the_whole_text(ensure_ascii):
    """Cut in two at every position (inside strings, escapes, \\u sequences and surrogate
    pairs), the path and the decoded text come out exactly as json.loads reads them."""
    text = json.dumps(WRITE, ensure_ascii=ensure_ascii)
    for cut in range(len(text) + 1):
        scanner, streamed = scan(text, [cut])
        assert scanner.names == {"path": WRITE["path"]}, cut
        assert streamed == WRITE["text"], cut
        assert scanner.chars == len(text)


def test_one_character_at_a_time():
    """Fed one character per fragment (as some providers stream), nothing is lost."""
    text = json.dumps(WRITE)
    scanner, streamed = scan(text, list(range(1, len(text))))
    assert scanner.names["path"] == WRITE["path"]
    assert streamed == WRITE["text"]


def test_path_is_known_only_once_its_string_ended():
    """A path cut mid-string is not shown half: it appears once its closing quote arrived."""
    scanner = ArgumentScanner()
    scanner.feed('{"path": "docs/in')
    assert scanner.names == {}
    scanner.feed('tro/index.page", "text": "He')
    assert scanner.names == {"path": "docs/intro/index.page"}
    assert scanner.take_text() == "He"
    scanner.feed("llo\\")
    assert scanner.take_text() == "llo"  # the escape is not complete yet
    scanner.feed("n\\u00")
    assert scanner.take_text() == "\n"
    scanner.feed("e9")
    assert scanner.take_text() == "é"


def test_edits_stream_each_new_text_on_its_own_line():
    """An edit's replacements stream their new_text (nested in the edits list), one after
    the other; old_text is not shown as written text."""
    text = json.dumps(EDIT)
    for cut in range(0, len(text) + 1, 3):
        scanner, streamed = scan(text, [cut])
        assert scanner.names == {"path": "a.txt"}
        assert streamed == "first\n\nsecond 😀"


def test_only_top_level_names_count():
    """A nested "path" (inside another object) is not the call's path; move names both."""
    scanner, _ = scan('{"options": {"path": "nested"}, "source": "a", "destination": "b"}', [])
    assert scanner.names == {"source": "a", "destination": "b"}


@pytest.mark.parametrize(
    "garbage",
    [
        '}}]]"path": "x"',
        '{"path": 12, "text": null}',
        '{"text": "\\uZZZZ tail", "path": "p"}',
        '{"text": "\\ud83d alone", "path": "p"}',
        '{"text": "\\ude00 low", "path": "p"}',
        "not json at all \\",
        '{"path": "a"',
        "",
    ],
)
def test_never_raises_on_broken_arguments(garbage):
    """Whatever the model sends, the scanner reads on without an exception."""
    for cut in range(len(garbage) + 1):
        scan(garbage, [cut])


def test_broken_escapes_are_shown_not_dropped():
    """A bad \\u escape or a lone surrogate shows as what can be read (U+FFFD for a lone
    surrogate), and the path after it is still found."""
    scanner, streamed = scan('{"text": "\\ud83d alone \\uZZ", "path": "p"}', [12])
    assert streamed.startswith("\ufffd alone ")
    assert scanner.names == {"path": "p"}


WRITES = [
    ("write_text_content", {"path": "a.md", "text": 'alpha "one"\n' * 20}),
    ("write_text_content", {"path": "docs/b.md", "text": "beta é 😀\n" * 20}),
]
# How providers stream parallel calls (PROVIDERS.md, "Tool-call deltas"), in the fake
# provider's terms: OpenAI, llama-cpp-python, Gemini, Ollama (both ways), LM Studio, and a
# trailing empty fragment.
QUIRKS = {
    "openai": {},
    "llama-cpp-python": {"ids": "every"},
    "gemini": {"ids": "none", "index": "missing", "arguments": "whole"},
    "ollama-whole": {"ids": "every", "index": "zero", "arguments": "whole"},
    "ollama-fragments": {"ids": "every", "index": "zero"},
    "lm-studio": {"empty_name_on_continuation": True},
    "trailing-empty": {"arguments": "trailing_empty"},
}


@pytest.mark.parametrize("quirk", QUIRKS)
def test_deltas_of_each_providers_stream_match_the_calls_it_makes(quirk, settings):
    """Fed chunk by chunk (a delta due after each), every provider's way of streaming two
    parallel writes gives each call its own deltas: the right name and path, text that is a
    prefix of what it writes, and last the id its TOOL_CALL carries."""
    settings.ROJO_TOOL_DELTA_SECONDS = 0.01
    accumulator = StreamAccumulator()
    deltas = ToolCallDeltas(accumulator)
    seen = []
    for n, chunk in enumerate(tool_call_chunks(WRITES, **QUIRKS[quirk])):
        accumulator.feed(chunk)
        seen += deltas.due(now=n * 1.0)
    completion = accumulator.result()
    seen += deltas.final_ids(completion.tool_calls)
    assert {d.index for d in seen} == {0, 1}
    for index, (name, args) in enumerate(WRITES):
        mine = [d for d in seen if d.index == index]
        assert {d.name for d in mine} == {name}
        assert mine[-1].path == args["path"]
        assert args["text"].startswith("".join(d.text for d in mine))
        assert mine[-1].id == completion.tool_calls[index]["id"]
