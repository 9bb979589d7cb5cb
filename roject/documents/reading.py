"""A project file's text as the model reads it: UTF-8 text as the storage gate gives it, or a
PDF's text with its page markers (`pdf.pdf_text`).

A PDF is known by its header, not its name. Read whole, its text is cut at the read limit with
a note saying how to read on (offset and limit, in lines of that text); read in parts, the
lines asked for are taken from the text of every page (up to the turn's read bound).
"""

from pathlib import Path

from django.conf import settings
from django.utils.translation import ngettext

from roject import storage
from roject.storage import StorageError

from .pdf import is_pdf, pdf_text

_HEAD_BYTES = 1024


def pdf_bytes(project_root: Path, relative_path: str) -> bytes | None:
    """The whole file if it is a PDF (refused over ROJO_MAX_PDF_BYTES), None if it is not."""
    with storage.open_regular_file(project_root, relative_path) as fh:
        if not is_pdf(fh.read(_HEAD_BYTES)):
            return None
        limit = settings.ROJO_MAX_PDF_BYTES
        fh.seek(0)
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise StorageError(f"{relative_path!r} is a PDF over the {limit:,}-byte limit for PDFs")
    return data


def project_file_text(project_root: Path, relative_path: str, *, max_bytes: int, note: str) -> str:
    """The file's whole text: a PDF's cut at `max_bytes` with `note` on how to read on; a text
    file as `storage.read_project_file` reads it (refused over the read limit)."""
    data = pdf_bytes(project_root, relative_path)
    if data is None:
        return storage.read_project_file(project_root, relative_path)
    return pdf_text(data, name=relative_path, max_bytes=max_bytes, note=note)


def project_file_lines(
    project_root: Path, relative_path: str, *, offset: int, limit: int | None
) -> dict:
    """Lines `offset`.. of the file's text, as `storage.read_lines` gives them for a text file:
    {"text", "startLine", "endLine", "cut"}, within the read limit."""
    data = pdf_bytes(project_root, relative_path)
    if data is None:
        return storage.read_lines(project_root, relative_path, offset=offset, limit=limit)
    if offset < 1:
        raise StorageError("offset is a line number and starts at 1")
    if limit is not None and limit < 1:
        raise StorageError("limit must be at least 1")
    whole = pdf_text(data, name=relative_path, max_bytes=settings.ROJO_TURN_READ_BYTES)
    lines = whole.splitlines(keepends=True)
    if offset > len(lines):
        raise StorageError(
            f"the text of {relative_path!r} has only {len(lines)} "
            f"{ngettext('line', 'lines', len(lines))}"
        )
    budget, taken, used = settings.ROJO_MAX_READ_BYTES, [], 0
    for line in lines[offset - 1 :]:
        size = len(line.encode())
        if (limit is not None and len(taken) >= limit) or (taken and used + size > budget):
            break
        taken.append(line if taken else line.encode()[:budget].decode(errors="ignore"))
        used += size
    return {
        "text": "".join(taken),
        "startLine": offset,
        "endLine": offset + len(taken) - 1,
        "cut": offset - 1 + len(taken) < len(lines),
    }
