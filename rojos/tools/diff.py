"""Unified diffs of a change, for the model and for a person approving it, at bounded cost.

difflib compares the lines that differ pairwise: 2,000 changed lines take 0.14 s, 40,000 took
93 s, under the project's change lock. The lines both texts share at the start and end are
skipped first (most edits are local); when what is left is still too big to compare, it is
shown as one block: every old line removed, every new one added. Either way the diff is
valid, and it is cut at a size a model can read.
"""

import difflib
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

from django.utils.translation import ngettext

from roject import storage

# Line pairs difflib may compare: 2,000 by 2,000 takes about 0.14 s.
MAX_PAIRS = 4_000_000
MAX_CHARS = 20_000
_CONTEXT = 3
_NO_NEWLINE = "\n\\ No newline at end of file\n"
_HUNK = re.compile(r"^@@ -(\d+)(,\d+)? \+(\d+)(,\d+)? @@")


def _lines(text: str) -> list[str]:
    """Lines split at newlines only; splitlines() also splits at form feeds, U+2028 and more."""
    lines = text.split("\n")
    return [line + "\n" for line in lines[:-1]] + ([lines[-1]] if lines[-1] else [])


def _shared_ends(a: list[str], b: list[str]) -> tuple[int, int]:
    """How many lines a and b share at the start, then at the end of what is left."""
    shortest = min(len(a), len(b))
    head = 0
    while head < shortest and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < shortest - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    return head, tail


def _range(start: int, stop: int) -> str:
    """A hunk's range as unified diffs write it (difflib's format)."""
    length = stop - start
    if length == 1:
        return str(start + 1)
    return f"{start + 1 if length else start},{length}"


def _one_block(a: list[str], b: list[str], head: int, tail: int) -> Iterator[str]:
    """One hunk: the shared lines around it as context, every line between replaced."""
    yield f"@@ -{_range(0, len(a))} +{_range(0, len(b))} @@\n"
    yield from (" " + line for line in a[:head])
    yield from ("-" + line for line in a[head : len(a) - tail])
    yield from ("+" + line for line in b[head : len(b) - tail])
    yield from (" " + line for line in a[len(a) - tail :])


def _shifted(hunks: Iterable[str], by: int) -> Iterator[str]:
    """Hunks of a slice, their line numbers moved to where the slice starts."""
    for line in hunks:
        match = _HUNK.match(line)
        if match:
            old, old_len, new, new_len = match.groups()
            line = f"@@ -{int(old) + by}{old_len or ''} +{int(new) + by}{new_len or ''} @@\n"
        yield line


def unified_diff(path: str, before: str, after: str) -> str:
    """A unified diff; a last line without newline is marked as git marks it."""
    a, b = _lines(before), _lines(after)
    head, tail = _shared_ends(a, b)
    skip, keep = max(head - _CONTEXT, 0), max(tail - _CONTEXT, 0)
    a, b = a[skip : len(a) - keep], b[skip : len(b) - keep]
    if (len(a) - head - tail) * (len(b) - head - tail) <= MAX_PAIRS:
        hunks = list(difflib.unified_diff(a, b, n=_CONTEXT))[2:]
    else:
        hunks = list(_one_block(a, b, head - skip, tail - keep))
    lines = [f"--- a/{path}\n", f"+++ b/{path}\n", *_shifted(hunks, skip)] if hunks else []
    return _cut([line if line.endswith("\n") else line + _NO_NEWLINE for line in lines])


def _cut(lines: list[str]) -> str:
    """The diff's lines up to MAX_CHARS, then how many more there were."""
    size = 0
    for kept, line in enumerate(lines):
        size += len(line)
        if size > MAX_CHARS:
            more = len(lines) - kept
            return (
                "".join(lines[:kept])
                + f"... the diff goes on for {more:,} more {ngettext('line', 'lines', more)}\n"
            )
    return "".join(lines)


def text_diff(project_root: Path, path: str, new_text: str) -> str:
    """The diff from a file's current text (empty when it does not exist yet) to `new_text`."""
    try:
        before = storage.read_project_file(project_root, path)
    except storage.StorageError as exc:
        if storage.entry_exists(project_root, path):
            return f"(replaces {path!r}, which cannot be shown as text: {exc})\n"
        before = ""
    return unified_diff(path, before, new_text)
