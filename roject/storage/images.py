"""Images people attach to messages, kept beside the project's root, by their content.

ROJO_STORAGE_DIR/<project_id>/images/<sha256> holds one image's bytes, outside the root:
no tool that works on the project's files reaches it, and a backup takes it with the undo
copies (`backups.PARTS`). An image is named by the SHA-256 of its bytes, so the same image
pasted twice is kept once and a message refers to it by that name; it is uploaded before
its message (and maybe its conversation) exists, so it is the project's. Its type comes from
its first bytes, never from a name a client sent: PNG, JPEG, WebP or GIF, anything else is
refused. Directories are 0700 and files 0600; an image is written under a temporary name
and renamed, so a reader never sees half of one. Who may read the project is checked by
the callers. An image goes when the last conversation that shows it is deleted
(`images_remove`), and with its project.
"""

import hashlib
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from .entries import temp_name
from .layout import UNDO_MODE, directory_make, project_dir
from .paths import StorageError, TooLarge

_NAME = re.compile(r"^[0-9a-f]{64}$")
_FILE_MODE = 0o600
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
# The types a model's image parts take, each known by how its bytes begin.
_SIGNATURES = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)
IMAGE_TYPES = ("image/png", "image/jpeg", "image/webp", "image/gif")


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredImage:
    """One kept image: its name (the SHA-256 of its bytes), type and size."""

    sha256: str
    type: str
    size: int

    def as_ref(self) -> dict:
        """How a message refers to it (`Message.extra["images"]`)."""
        return {"sha256": self.sha256, "type": self.type, "size": self.size}


def image_type(data: bytes) -> str | None:
    """The image type its first bytes say (PNG, JPEG, WebP, GIF); None for anything else."""
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return next((kind for magic, kind in _SIGNATURES if data.startswith(magic)), None)


def _images_dir(project_id: int) -> Path:
    return project_dir(project_id) / "images"


def image_keep(*, project_id: int, data: bytes, max_bytes: int) -> StoredImage:
    """(Blocking) Keep an image for the project and return it; StorageError for bytes that
    are no PNG, JPEG, WebP or GIF, TooLarge for more than `max_bytes`."""
    if len(data) > max_bytes:
        raise TooLarge(f"the image is over the limit of {max_bytes:,} bytes")
    kind = image_type(data)
    if kind is None:
        raise StorageError("that is not an image a model takes: PNG, JPEG, WebP or GIF")
    name = hashlib.sha256(data).hexdigest()
    directory = _images_dir(project_id)
    directory_make(directory.parent)
    directory_make(directory, UNDO_MODE)
    if not (directory / name).is_file():
        temporary = directory / temp_name()
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
        fd = os.open(temporary, flags, _FILE_MODE)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.rename(temporary, directory / name)
        except BaseException:
            temporary.unlink(missing_ok=True)
            raise
    return StoredImage(sha256=name, type=kind, size=len(data))


def image_read(*, project_id: int, sha256: str) -> tuple[StoredImage, bytes]:
    """(Blocking) A kept image and its bytes; StorageError when the project holds none by
    that name."""
    if not isinstance(sha256, str) or not _NAME.match(sha256):
        raise StorageError(f"no image {sha256!r} in this project")
    try:
        fd = os.open(_images_dir(project_id) / sha256, _READ)
    except FileNotFoundError:
        raise StorageError(f"no image {sha256!r} in this project") from None
    with os.fdopen(fd, "rb") as fh:
        data = fh.read()
    kind = image_type(data) or "application/octet-stream"
    return StoredImage(sha256=sha256, type=kind, size=len(data)), data


def images_remove(*, project_id: int, sha256s: Iterable[str]) -> None:
    """(Blocking) Remove kept images by name: no message of the project shows them now."""
    for name in sha256s:
        if isinstance(name, str) and _NAME.match(name):
            (_images_dir(project_id) / name).unlink(missing_ok=True)
