"""PDFs people attach to messages (dropped, pasted or picked in the message box), kept beside
the project's root by their content (`kept`: ROJO_STORAGE_DIR/<project_id>/pdfs/<sha256>,
0600, in backups), as images are.

The gate keeps bytes that begin as a PDF does, within the size given; whether pypdf can read
them is the caller's to find out first (roject/documents, in a limited child process). A PDF
goes when the last conversation that shows it is deleted (`pdfs_remove`), and with its project.
"""

from collections.abc import Iterable

from .kept import kept_read, kept_remove, kept_write
from .paths import StorageError, TooLarge

_PART = "pdfs"  # one of kept.PARTS
_MAGIC = b"%PDF-"


def pdf_keep(*, project_id: int, data: bytes, max_bytes: int) -> str:
    """(Blocking) Keep a PDF for the project and return its name (the SHA-256 of its bytes);
    TooLarge for more than `max_bytes`, StorageError for bytes with no PDF header in their
    first kilobyte."""
    if len(data) > max_bytes:
        raise TooLarge(f"the PDF is over the limit of {max_bytes:,} bytes")
    if _MAGIC not in data[:1024]:
        raise StorageError("that is not a PDF (its bytes do not begin as a PDF's)")
    return kept_write(project_id=project_id, part=_PART, data=data)


def pdf_read(*, project_id: int, sha256: str) -> bytes:
    """(Blocking) A kept PDF's bytes; StorageError when the project holds none by that name."""
    data = kept_read(project_id=project_id, part=_PART, sha256=sha256)
    if data is None:
        raise StorageError(f"no PDF {sha256!r} in this project")
    return data


def pdfs_remove(*, project_id: int, sha256s: Iterable[str]) -> None:
    """(Blocking) Remove kept PDFs by name: no message of the project shows them now."""
    kept_remove(project_id=project_id, part=_PART, sha256s=sha256s)
