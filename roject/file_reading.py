"""Reading big files in parts and searching text, with bounded memory and output."""

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from django.conf import settings

from .storage import StorageError, is_temp_file, open_regular_file, reported, resolve

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
        raise StorageError(f"{relative_path!r} has only {number} lines")
    return {
        "text": "".join(lines),
        "startLine": offset,
        "endLine": offset + len(lines) - 1,
        "cut": cut,
    }


def search_text(project_root: Path, relative_path: str, query: str, *, regex: bool = False) -> dict:
    """Lines containing `query` (or matching it as a regex) in text files under a directory."""
    if not query:
        raise StorageError("query must not be empty")
    try:
        pattern = re.compile(query if regex else re.escape(query))
    except re.error as exc:
        raise StorageError(f"query is not a valid regular expression: {exc}") from None
    start = resolve(project_root, relative_path)
    root = Path(project_root).resolve()
    matches: list[dict] = []
    with reported(relative_path):
        if not start.is_dir():
            raise StorageError(f"{relative_path!r} is not a directory")
        for dirpath, dirnames, filenames in os.walk(start):
            dirnames.sort()
            for name in sorted(filenames):
                path = Path(dirpath) / name
                # A leftover temporary file holds a write that never happened (a crash).
                if path.is_symlink() or is_temp_file(name):
                    continue
                rel = str(path.relative_to(root))
                if _search_file(root, rel, pattern, matches):
                    return {"matches": matches, "cut": True}
    return {"matches": matches, "cut": False}


def _search_file(root: Path, rel: str, pattern: re.Pattern, matches: list[dict]) -> bool:
    """Append the file's matches; True once the cap is reached. Unreadable files are skipped."""
    try:
        with open_regular_file(root, rel, max_size=settings.ROJO_MAX_READ_BYTES) as fh:
            if b"\x00" in fh.peek(_SNIFF_BYTES)[:_SNIFF_BYTES]:
                return False
            for number, raw in enumerate(fh, start=1):
                line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
                if pattern.search(line[:10_000]):
                    if len(matches) >= MAX_MATCHES:
                        return True
                    matches.append({"path": rel, "line": number, "text": line[:MAX_LINE_CHARS]})
    except StorageError:
        return False
    return False
