"""A PDF's text through the child process (`pdf_child`), and that text as the model reads it.

The child gets `ROJO_PDF_SECONDS` of CPU and wall time and `ROJO_PDF_MEMORY_BYTES` of address
space; past either it is killed and the read is refused with a clear error, and the server
goes on. Blocking: async callers run it with `asyncio.to_thread`.
"""

import json
import subprocess
import sys
from pathlib import Path

from django.conf import settings

from roject.storage import StorageError

PDF_MAGIC = b"%PDF-"


class DocumentError(StorageError):
    """A document that cannot be read as text; the message names the file and why (a
    StorageError: to the model, a tool error like any file it cannot read)."""


def is_pdf(head: bytes) -> bool:
    """Whether these first bytes are a PDF's: its header first, or, as readers allow, after
    some junk within the first kilobyte, when that junk is not text (a text file that
    mentions the header is still text)."""
    if head.lstrip().startswith(PDF_MAGIC):
        return True
    if PDF_MAGIC not in head[:1024]:
        return False
    try:
        return b"\x00" in head or not head.decode("utf-8", errors="strict")
    except UnicodeDecodeError:
        return True


def pdf_pages(data: bytes, *, name: str, max_chars: int) -> tuple[list[str], int]:
    """The text of the PDF's first pages, until `max_chars` characters are drawn, and how
    many pages it has."""
    seconds = settings.ROJO_PDF_SECONDS
    memory = settings.ROJO_PDF_MEMORY_BYTES

    try:
        done = subprocess.run(
            [
                sys.executable,
                "-I",  # by its path, isolated: the child loads pypdf, nothing of ours or Django
                str(Path(__file__).with_name("pdf_child.py")),
                *map(str, (max_chars, seconds, memory)),
            ],
            input=data,
            capture_output=True,
            timeout=seconds + 2,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise DocumentError(f"{name!r}: reading the PDF took over {seconds} s") from None
    try:
        found = json.loads(done.stdout)
    except ValueError:
        raise DocumentError(
            f"{name!r}: the PDF could not be read within {seconds} s and "
            f"{memory // 2**20} MiB (its reader stopped)"
        ) from None
    if "error" in found:
        raise DocumentError(f"{name!r}: {found['error']}")
    return found["pages"], found["count"]


def pdf_text(data: bytes, *, name: str, max_bytes: int, note: str = "") -> str:
    """The PDF's text for the model: `[page N of M]` before each page's text, cut at
    `max_bytes` (UTF-8) with a note naming the pages left out and, if given, how to read on
    (`note`). A page with no text (a scan) says so."""
    return pdf_read(data, name=name, max_bytes=max_bytes, note=note)[0]


def pdf_read(data: bytes, *, name: str, max_bytes: int, note: str = "") -> tuple[str, int]:
    """The PDF's text as `pdf_text` gives it, and how many pages it has (for a chip that
    names them)."""
    pages, count = pdf_pages(data, name=name, max_chars=max_bytes)
    return _text(pages, count, max_bytes=max_bytes, note=note), count


def _text(pages: list[str], count: int, *, max_bytes: int, note: str) -> str:
    room = max_bytes - len(note.encode()) - 120  # what the cut leaves the note
    parts, size = [], 0
    for number, text in enumerate(pages, start=1):
        text = text.strip() or "(no text on this page: a scan or a picture)"
        part = f"[page {number} of {count}]\n{text}\n"
        part_size = len(part.encode())
        if size + part_size > max_bytes or (size + part_size > room and number < count):
            if room - size > 200:  # the start of the page, whole characters, where worth it
                parts.append(part.encode()[: room - size].decode(errors="ignore") + "\n")
            parts.append(_cut_note(first=number, count=count, max_bytes=max_bytes, note=note))
            return "".join(parts)
        parts.append(part)
        size += part_size
    if len(pages) < count:
        parts.append(_cut_note(first=len(pages) + 1, count=count, max_bytes=max_bytes, note=note))
    return "".join(parts)


def _cut_note(*, first: int, count: int, max_bytes: int, note: str) -> str:
    pages = f"page {first}" if first == count else f"pages {first} to {count}"
    return f"[cut: {pages} of {count} not shown, over the {max_bytes:,}-byte read limit{note}]\n"
