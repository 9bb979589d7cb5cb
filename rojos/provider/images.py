"""Images attached to a user message, as the provider gets them: image parts, for a model
that takes images, and a refusal before any request for one that does not.

An image is uploaded (rojos/web/images_api.py) or `@`-mentioned (a PNG, JPEG, WebP or GIF
of the project) and kept by the storage gate (roject/storage/images.py); the message keeps
references to it (`extra["images"]`: sha256, type, size), never its bytes. The history goes
to the request with a placeholder URL per image (`image_parts`), so the window's counting
and compaction work on small items; just before the request is sent, the placeholders
become data URLs (`images_inline`), the shape every OpenAI-compatible provider takes. A
model that takes no images (the conversation switched to one) gets a line of text in place
of an older image instead.
"""

import base64

from django.conf import settings
from django.utils.translation import ngettext

from roject import storage
from roject.errors import AppError
from rojos.models import Rojo
from rojos.models.capabilities import capabilities_for

from .attachments import IMAGE_SUFFIXES

_PLACEHOLDER = "rojo-image:"
_LEFT_OUT = "[an image was attached here; this model does not take images]"


class ImagesRefused(AppError):
    """A message with images for a model that takes none, or over the images' limits."""


def images_taken(rojo: Rojo, model: str | None = None) -> bool:
    """Whether `model` (default: the rojo's) takes images: the rojo says so, or, left to
    auto, its self-test found it does. Untested is no: the request would fail or the
    model would answer without seeing the image."""
    if rojo.images == Rojo.Images.YES:
        return True
    if rojo.images == Rojo.Images.NO:
        return False
    return capabilities_for(rojo, model).images is True


def image_models(rojo: Rojo) -> list[str]:
    """The models of the rojo known to take images (from their self-tests), by name."""
    if rojo.images == Rojo.Images.NO:
        return []
    profiles = rojo.capability_profiles if isinstance(rojo.capability_profiles, dict) else {}
    return sorted(name for name in profiles if capabilities_for(rojo, name).images is True)


def images_check(*, rojo: Rojo, model: str | None, count: int) -> None:
    """Refuse (ImagesRefused) `count` images for the message: over the per-message limit,
    or for a model that takes none (saying which of the rojo's models do, when known)."""
    limit = settings.ROJO_MAX_IMAGES_PER_MESSAGE
    if count > limit:
        raise ImagesRefused(
            f"A message can carry at most {limit} {ngettext('image', 'images', limit)}; "
            "attach fewer."
        )
    name = model or rojo.model
    if not count or images_taken(rojo, name):
        return
    others = [m for m in image_models(rojo) if m != name]
    hint = (
        f" Of this rojo's models, {', '.join(repr(m) for m in others)} take images."
        if others
        else " None of this rojo's models is known to take images (an administrator can "
        "run its provider self-test, or say so in the admin)."
    )
    raise ImagesRefused(f"The model {name!r} does not take images, so nothing was sent.{hint}")


def is_image_path(path: str) -> bool:
    """Whether an `@`-mentioned path is attached as an image (by its name; its bytes must
    then say so too)."""
    return path.lower().endswith(IMAGE_SUFFIXES)


def images_gather(*, project_id: int, ids: list[str], paths: list[str]) -> list[dict]:
    """(Blocking) The references of a message's images: the uploaded ones (`ids`, which the
    project must hold) and the project's image files `@`-mentioned (`paths`, read through
    the gate and kept like an upload). StorageError for one that is not there or no image."""
    refs = []
    for sha256 in dict.fromkeys(ids):
        image, _ = storage.image_read(project_id=project_id, sha256=sha256)
        refs.append(image.as_ref())
    root = storage.project_root_create(project_id)
    limit = settings.ROJO_MAX_IMAGE_BYTES
    for path in dict.fromkeys(paths):
        with storage.open_regular_file(root, path, max_size=limit) as fh:
            data = fh.read(limit + 1)
        try:
            image = storage.image_keep(project_id=project_id, data=data, max_bytes=limit)
        except storage.StorageError as error:
            raise storage.StorageError(f"{path!r}: {error}") from None
        refs.append({**image.as_ref(), "path": path})
    return refs


def image_parts(text: str, images: list[dict]) -> list[dict]:
    """A user message with images as the request's content parts: its text, then each image
    by a placeholder that `images_inline` fills in."""
    parts: list[dict] = [{"type": "text", "text": text}]
    for image in images:
        url = f"{_PLACEHOLDER}{image['sha256']}"
        parts.append({"type": "image_url", "image_url": {"url": url}})
    return parts


def images_inline(messages: list[dict], *, project_id: int, taken: bool) -> list[dict]:
    """(Blocking) The request's messages with each image placeholder as a data URL, or, for
    a model that takes no images, as a line of text. A kept image gone missing is told the
    same way. Messages without images are the same objects."""
    out = []
    for item in messages:
        content = item.get("content")
        if not isinstance(content, list):
            out.append(item)
            continue
        parts = [_inlined(part, project_id, taken) for part in content]
        out.append({**item, "content": parts})
    return out


def _inlined(part: dict, project_id: int, taken: bool) -> dict:
    url = part.get("image_url", {}).get("url", "") if part.get("type") == "image_url" else ""
    if not url.startswith(_PLACEHOLDER):
        return part
    if not taken:
        return {"type": "text", "text": _LEFT_OUT}
    try:
        image, data = storage.image_read(project_id=project_id, sha256=url[len(_PLACEHOLDER) :])
    except storage.StorageError:
        return {"type": "text", "text": "[an image was attached here; it is no longer kept]"}
    encoded = base64.b64encode(data).decode("ascii")
    return {"type": "image_url", "image_url": {"url": f"data:{image.type};base64,{encoded}"}}
