"""Reading big files in parts and searching text, with bounded memory and output."""

import os
import time
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import BinaryIO

import regex as regex_engine
from django.conf import settings
from django.utils.translation import ngettext

from .beneath import opened
from .files import open_regular_file, regular_file
from .paths import StorageError, is_temp_file
from .pattern_size import MAX_EXPANSION, expansion

MAX_MATCHES = 100
MAX_LINE_CHARS = 500
_SNIFF_BYTES = 8192


def _decode(raw: bytes, relative_path: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise StorageError(f"{relative_path!r} is not UTF-8 text") from None


def _bounded_lines(fh: BinaryIO, cap: int) -> Iterator[bytes]:
    """The file's lines; one over `cap` bytes is cut to `cap + 1`, its rest read and dropped."""
    while raw := fh.readline(cap + 1):
        rest = raw
        while len(rest) > cap and not rest.endswith(b"\n"):
            rest = fh.readline(cap + 1)
        yield raw


def read_lines(project_root: Path, relative_path: str, *, offset: int, limit: int | None) -> dict:
    """Lines `offset`.. (1-based) of a text file, at most `limit` of them and the read limit.

    The file is streamed line by line, so a file of any size costs memory only for the
    part returned; `cut` says whether more lines follow.
    """
    if offset < 1:
        raise StorageError("offset is a line number and starts at 1")
    if limit is not None and limit < 1:
        raise StorageError("limit must be at least 1")
    budget = settings.ROJO_MAX_READ_BYTES
    lines: list[str] = []
    used = 0
    cut = False
    with open_regular_file(project_root, relative_path) as fh:
        if b"\x00" in fh.peek(_SNIFF_BYTES)[:_SNIFF_BYTES]:
            raise StorageError(f"{relative_path!r} is a binary file, not text")
        number = 0
        for number, raw in enumerate(_bounded_lines(fh, budget), start=1):
            if number < offset:
                continue
            if not lines and len(raw) > budget:
                raise StorageError(
                    f"line {number} of {relative_path!r} is longer than the {budget}-byte "
                    f"read limit; continue with offset {number + 1}"
                )
            if (limit is not None and len(lines) >= limit) or used + len(raw) > budget:
                cut = True
                break
            lines.append(_decode(raw, relative_path))
            used += len(raw)
    if offset > 1 and not lines and number < offset:
        raise StorageError(
            f"{relative_path!r} has only {number} {ngettext('line', 'lines', number)}"
        )
    return {
        "text": "".join(lines),
        "startLine": offset,
        "endLine": offset + len(lines) - 1,
        "cut": cut,
    }


class SearchTimeout(Exception):
    """The search ran out of time. Not an OSError, which TimeoutError is: that would read as
    an unreadable file and be skipped."""


def _matches(pattern, line: str, deadline: float) -> bool:
    remaining = deadline - time.monotonic()
    try:
        if remaining <= 0:
            raise SearchTimeout
        return pattern.search(line, timeout=remaining) is not None
    except TimeoutError:
        raise SearchTimeout from None


def search_text(project_root: Path, relative_path: str, query: str, *, regex: bool = False) -> dict:
    """Lines containing `query` (or matching it as a regex) in text files under a directory.

    The pattern comes from a model: a catastrophic one would hold its thread for ever with
    `re`, so the `regex` engine runs it under a deadline for the whole search, and one that
    would take gigabytes to compile is refused first.
    """
    if not query:
        raise StorageError("query must not be empty")
    if regex and (size := expansion(query)) > MAX_EXPANSION:
        raise StorageError(
            f"query repeats too much: its counted repeats come to {size:,} characters written "
            f"out, over {MAX_EXPANSION:,}; use smaller counts, or + and *"
        )
    try:
        pattern = regex_engine.compile(query if regex else regex_engine.escape(query))
    except regex_engine.error as exc:
        raise StorageError(f"query is not a valid regular expression: {exc}") from None
    deadline = time.monotonic() + settings.ROJO_SEARCH_SECONDS
    try:
        return _search_tree(project_root, relative_path, pattern, deadline)
    except SearchTimeout:
        raise StorageError(
            f"the search took longer than {settings.ROJO_SEARCH_SECONDS:g} s; "
            "use a simpler pattern or search a smaller directory"
        ) from None


def _search_tree(project_root: Path, relative_path: str, pattern, deadline: float) -> dict:
    matches: list[dict] = []
    label = PurePosixPath(relative_path)
    with opened(project_root, relative_path) as root:
        try:
            start = root.open_dir(relative_path)
        except (FileNotFoundError, NotADirectoryError):
            raise StorageError(f"{relative_path!r} is not a directory") from None
        try:
            # fwalk opens each directory from its parent's descriptor and does not follow links.
            for dirpath, dirnames, filenames, dir_fd in os.fwalk(".", dir_fd=start):
                dirnames.sort()
                for name in sorted(filenames):
                    # A leftover temporary file holds a write that never happened (a crash).
                    if is_temp_file(name):
                        continue
                    rel = str(label / dirpath / name)
                    if _search_file(dir_fd, name, rel, pattern, matches, deadline):
                        return {"matches": matches, "cut": True}
        finally:
            os.close(start)
    return {"matches": matches, "cut": False}


def _search_file(
    dir_fd: int, name: str, rel: str, pattern, matches: list[dict], deadline: float
) -> bool:
    """Append the file's matches; True once the cap is reached. Links, unreadable files and
    files with other hard links are skipped."""
    try:
        fd = os.open(
            name, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd
        )
    except OSError:
        return False
    try:
        with regular_file(fd, rel, max_size=settings.ROJO_MAX_READ_BYTES) as fh:
            if b"\x00" in fh.peek(_SNIFF_BYTES)[:_SNIFF_BYTES]:
                return False
            for number, raw in enumerate(fh, start=1):
                line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
                if _matches(pattern, line[:10_000], deadline):
                    if len(matches) >= MAX_MATCHES:
                        return True
                    matches.append({"path": rel, "line": number, "text": line[:MAX_LINE_CHARS]})
    except (StorageError, OSError):
        return False
    return False
