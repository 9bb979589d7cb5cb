"""What the file browser shows people (a directory's entries, a file's text) and what a
project's MCP resources read (a file's bytes)."""

import hashlib
import os

from django.conf import settings

from .files import iso_utc, list_directory, open_regular_file, text_of
from .layout import project_root_create
from .paths import StorageError


def project_files_list(*, project_id: int, path: str) -> list[dict]:
    """(Blocking) The entries of a directory in the project, sorted by name."""
    return list_directory(project_root_create(project_id), path)


def project_file_show(*, project_id: int, path: str) -> dict:
    """(Blocking) A text file's content with its size, modification time and version (what
    a save names as its base), from one open."""
    limit = settings.ROJO_MAX_READ_BYTES
    with open_regular_file(project_root_create(project_id), path) as fh:
        st = os.fstat(fh.fileno())
        if st.st_size > limit:  # said for people, not a model
            raise StorageError(
                f"{path!r} is {st.st_size:,} bytes, too big to show here (the limit is "
                f"{limit:,} bytes)"
            )
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise StorageError(f"{path!r} is over the {limit:,}-byte limit of what is shown here")
    text = text_of(data, path)
    version = {"size": len(data), "mtime_ns": st.st_mtime_ns}
    version["sha256"] = hashlib.sha256(data).hexdigest()
    return {
        "path": path,
        "text": text,
        "size": st.st_size,
        "modifiedAt": iso_utc(st.st_mtime),
        "version": version,
    }


def project_file_read(*, project_id: int, path: str, head: int | None = None) -> bytes:
    """(Blocking) A file's bytes, text or not: its first `head` bytes, or the whole file
    within ROJO_MAX_READ_BYTES (StorageError past it)."""
    limit = settings.ROJO_MAX_READ_BYTES
    with open_regular_file(project_root_create(project_id), path) as fh:
        if head is not None:
            return fh.read(head)
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise StorageError(f"{path!r} is over the {limit:,}-byte limit of what is read here")
    return data
