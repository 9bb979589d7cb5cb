"""Files attached to a message as text: the project's files it `@`-mentions, and the PDFs
dropped, pasted or picked in the message box. Their text goes to the model with the message,
within the read limit, and the page shows a chip for each.

The text is read when the message is sent (a project file through the storage gate, an
uploaded PDF from where the gate keeps it, roject/storage/pdfs.py; a PDF either way by
roject/documents, with its page markers) and kept with the message (`extra["attachments"]`,
`extra["pdfs"]` with the PDF's reference), so the conversation replays, exports and is sent
again as the model first saw it, whatever the file became since.
"""

from collections.abc import Sequence
from html import escape

from django.conf import settings

from roject import storage
from roject.documents.pdf import is_pdf, pdf_pages, pdf_read
from roject.documents.reading import project_file_text
from roject.errors import AppError
from roject.storage import TooLarge

MAX_ATTACHMENTS = 10
PDF_TYPE = "application/pdf"


class PdfsRefused(AppError):
    """A message with more PDFs than ROJO_MAX_PDFS_PER_MESSAGE."""


def pdfs_check(*, count: int) -> None:
    """Refuse (PdfsRefused) `count` PDFs for one message when over the per-message limit."""
    limit = settings.ROJO_MAX_PDFS_PER_MESSAGE
    if count > limit:
        raise PdfsRefused(f"A message can carry at most {limit} PDFs; attach fewer.")


def attachments_read(*, project_id: int, paths: list[str], pdfs: Sequence[dict] = ()) -> list[dict]:
    """(Blocking) [{path, size, text}] of the attached files, then [{sha256, type, name, size,
    pages, text}] of the uploaded PDFs (`pdfs`: {sha256, name}), refused (StorageError) when
    one cannot be read as text or all of them pass ROJO_MAX_READ_BYTES together. A PDF gives
    its text with page markers, cut with a note at what the files before it left of the limit."""
    root = storage.project_root_create(project_id)
    limit, total, found = settings.ROJO_MAX_READ_BYTES, 0, []
    for path in dict.fromkeys(paths):
        note = "; the rojo can read on with get_text_content"
        text = project_file_text(root, path, max_bytes=max(limit - total, 0), note=note)
        total = _counted(total, text, limit)
        found.append({"path": path, "size": len(text.encode()), "text": text})
    for sha256, name in dict((p["sha256"], p["name"]) for p in pdfs).items():
        data = storage.pdf_read(project_id=project_id, sha256=sha256)
        text, pages = pdf_read(data, name=name, max_bytes=max(limit - total, 0))
        total = _counted(total, text, limit)
        ref = pdf_ref(sha256=sha256, name=name, size=len(data), pages=pages)
        found.append({**ref, "text": text})
    return found


def pdf_ref(*, sha256: str, name: str, size: int, pages: int) -> dict:
    """How a message refers to an uploaded PDF (`extra["pdfs"]`, with its text)."""
    return {"sha256": sha256, "type": PDF_TYPE, "name": name, "size": size, "pages": pages}


def _counted(total: int, text: str, limit: int) -> int:
    total += len(text.encode())
    if total > limit:
        raise TooLarge(f"the attached files are over {limit:,} bytes together; attach fewer")
    return total


def attachments_wire(content: str, attachments: list[dict]) -> str:
    """A user message's text as the model reads it: the message, then each attached file, by
    its path in the project, or by its `name` for an uploaded PDF (no path: it is not one of
    the project's files). Either is escaped (`"`, `<`, `>`, `&`): a file's name cannot fake
    where one ends."""
    parts = [content]
    for attached in attachments:
        key = "path" if "path" in attached else "name"
        named = escape(attached[key], quote=True)
        parts.append(f'<attached-file {key}="{named}">\n{attached["text"]}\n</attached-file>')
    return "\n\n".join(parts)


# `@`-mentioned files with these names go as images (rojos/provider/images.py), not text.
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".webp")


def pdf_name(name: str) -> str:
    """A PDF's name as a message keeps and shows it: its last part, without control
    characters, at most 200 characters; `document.pdf` for none."""
    name = "".join(c for c in name.replace("\\", "/").rsplit("/", 1)[-1] if c.isprintable())
    return name.strip()[:200] or "document.pdf"


def pdf_upload(*, project_id: int, data: bytes, name: str) -> dict:
    """(Blocking) Keep an uploaded PDF once its reader has opened it, and return its reference
    (`pdf_ref`). Refused before it is kept: over ROJO_MAX_PDF_BYTES (TooLarge), bytes that are
    no PDF, a broken or encrypted one (StorageError, naming the file and why)."""
    limit = settings.ROJO_MAX_PDF_BYTES
    name = pdf_name(name)
    if len(data) > limit:
        raise TooLarge(f"{name!r} is a PDF over the {limit:,}-byte limit for PDFs")
    if not is_pdf(data[:1024]):
        raise storage.StorageError(f"{name!r} is not a PDF (its bytes do not begin as a PDF's)")
    _, pages = pdf_pages(data, name=name, max_chars=0)  # one page read: it opens, its count
    sha256 = storage.pdf_keep(project_id=project_id, data=data, max_bytes=limit)
    return pdf_ref(sha256=sha256, name=name, size=len(data), pages=pages)
