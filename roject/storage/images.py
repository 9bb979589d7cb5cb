"""Images people attach to messages, kept beside the project's root by their content
(`kept`: ROJO_STORAGE_DIR/<project_id>/images/<sha256>, 0600, in backups).

An image's type comes from its first bytes, never from a name a client sent: PNG, JPEG,
WebP or GIF, anything else is refused. An image goes when the last conversation that shows
it is deleted (`images_remove`), and with its project.
"""

from collections.abc import Iterable
from dataclasses import dataclass

from .kept import kept_read, kept_remove, kept_write
from .paths import StorageError, TooLarge

_PART = "images"  # one of kept.PARTS
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


def image_keep(*, project_id: int, data: bytes, max_bytes: int) -> StoredImage:
    """(Blocking) Keep an image for the project and return it; StorageError for bytes that
    are no PNG, JPEG, WebP or GIF, TooLarge for more than `max_bytes`."""
    if len(data) > max_bytes:
        raise TooLarge(f"the image is over the limit of {max_bytes:,} bytes")
    kind = image_type(data)
    if kind is None:
        raise StorageError("that is not an image a model takes: PNG, JPEG, WebP or GIF")
    name = kept_write(project_id=project_id, part=_PART, data=data)
    return StoredImage(sha256=name, type=kind, size=len(data))


def image_read(*, project_id: int, sha256: str) -> tuple[StoredImage, bytes]:
    """(Blocking) A kept image and its bytes; StorageError when the project holds none by
    that name."""
    data = kept_read(project_id=project_id, part=_PART, sha256=sha256)
    if data is None:
        raise StorageError(f"no image {sha256!r} in this project")
    kind = image_type(data) or "application/octet-stream"
    return StoredImage(sha256=sha256, type=kind, size=len(data)), data


def images_remove(*, project_id: int, sha256s: Iterable[str]) -> None:
    """(Blocking) Remove kept images by name: no message of the project shows them now."""
    kept_remove(project_id=project_id, part=_PART, sha256s=sha256s)
