"""Images for the message box: uploaded before their message is sent, served back for the
thumbnails in a user's bubble.

Any member may upload (a viewer chats in their own conversations, as with `@` files): who
may is decided before the body is read (roject/server/upload_gate.py), the body is cut past
ROJO_MAX_IMAGE_BYTES as it arrives (roject/server/upload_guard.py), and its type comes from
its first bytes. An image is kept by the storage gate under the SHA-256 of its bytes
(roject/storage/images.py), which the chat request then names (`ChatIn.images`). Serving
one says its stored type, `nosniff`, and a CSP that runs nothing, so an image is never
taken for a page.
"""

import asyncio

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from ninja import Router, Schema

from roject import storage
from roject.api_answers import answers
from roject.members.access import aproject_access
from roject.server.upload_gate import upload_preflight

router = Router(tags=["images"])

_SUFFIX = {"image/png": "png", "image/jpeg": "jpg", "image/webp": "webp", "image/gif": "gif"}


class ImageOut(Schema):
    sha256: str
    type: str
    size: int


@router.post("/{int:project_id}/images", response=answers(ImageOut, 400, 403, 404, 413))
async def image_upload(request: HttpRequest, project_id: int):
    """Upload one image (PNG, JPEG, WebP or GIF) as the request's body, for a message to
    attach by its `sha256`. Over ROJO_MAX_IMAGE_BYTES: 413; another type: 400."""
    access = await aproject_access(user=request.auth, project_id=project_id)
    if (go_ahead := upload_preflight(request)) is not None:
        return go_ahead  # the ASGI gate asked, before the body came
    limit = settings.ROJO_MAX_IMAGE_BYTES

    def keep() -> storage.StoredImage:
        data = request.read(limit + 1)
        return storage.image_keep(project_id=access.project.pk, data=data, max_bytes=limit)

    image = await asyncio.to_thread(keep)
    return image.as_ref()


@router.get("/{int:project_id}/images/{sha256}", response=answers(None, 404))
async def image_show(request: HttpRequest, project_id: int, sha256: str):
    """An image attached to a message of the project, as its stored type."""
    access = await aproject_access(user=request.auth, project_id=project_id)
    try:
        image, data = await asyncio.to_thread(
            storage.image_read, project_id=access.project.pk, sha256=sha256
        )
    except storage.StorageError:
        raise Http404("No such image.") from None
    response = HttpResponse(data, content_type=image.type)
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = "default-src 'none'; sandbox"
    response["Content-Disposition"] = (
        f'inline; filename="{sha256}.{_SUFFIX.get(image.type, "bin")}"'
    )
    # Its name is its content: the same name never serves other bytes.
    response["Cache-Control"] = "private, max-age=31536000, immutable"
    return response
