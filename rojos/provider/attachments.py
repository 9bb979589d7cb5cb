"""Files attached to a message (`@path` in the message box): their text goes to the model with
the message, within the read limit, and the page shows a chip for each.

The text is read through the storage gate when the message is sent and kept with the message
(`extra["attachments"]`), so the conversation replays, exports and is sent again as the
model first saw it, whatever the file became since.
"""

from html import escape

from django.conf import settings

from roject import storage
from roject.documents.reading import project_file_text
from roject.storage import TooLarge

MAX_ATTACHMENTS = 10


def attachments_read(*, project_id: int, paths: list[str]) -> list[dict]:
    """(Blocking) [{path, size, text}] of the attached files, refused (StorageError) when one
    cannot be read as text or all of them pass ROJO_MAX_READ_BYTES together. A PDF gives its
    text with page markers, cut with a note at what the files before it left of the limit."""
    root = storage.project_root_create(project_id)
    limit, total, found = settings.ROJO_MAX_READ_BYTES, 0, []
    for path in dict.fromkeys(paths):
        note = "; the rojo can read on with get_text_content"
        text = project_file_text(root, path, max_bytes=max(limit - total, 0), note=note)
        size = len(text.encode())
        total += size
        if total > limit:
            raise TooLarge(f"the attached files are over {limit:,} bytes together; attach fewer")
        found.append({"path": path, "size": size, "text": text})
    return found


def attachments_wire(content: str, attachments: list[dict]) -> str:
    """A user message's text as the model reads it: the message, then each attached file.
    The path is escaped (`"`, `<`, `>`, `&`): a file's name cannot fake where one ends."""
    parts = [content]
    for attached in attachments:
        path = escape(attached["path"], quote=True)
        parts.append(f'<attached-file path="{path}">\n{attached["text"]}\n</attached-file>')
    return "\n\n".join(parts)


# `@`-mentioned files with these names go as images (rojos/provider/images.py), not text.
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".webp")
