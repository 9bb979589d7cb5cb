"""What a chat message attaches: the project's files it `@`-mentions (text, or images for
PNG, JPEG, WebP and GIF) and the images and PDFs pasted, dropped or attached in the message
box (a PDF as its text, for any model).

All of it is checked before the turn starts, so a refusal (a model that takes no images,
too many images, a file that cannot be read) comes before any request to the provider.
"""

import asyncio

from rojos.provider.attachments import attachments_read, pdf_name, pdfs_check
from rojos.provider.images import images_check, images_gather, is_image_path
from rojos.web.chat_schemas import ChatIn
from rojos.web.selectors import ChatContext


async def chat_attachments(*, checked: ChatContext, payload: ChatIn) -> list[dict] | None:
    """The message's attachments as its turn keeps them: text files ({path, size, text}),
    uploaded PDFs ({sha256, type, name, size, pages, text}), then images ({sha256, type,
    size}, and `path` for a mentioned one); None for none."""
    paths = payload.attachments or []
    image_paths = [p for p in paths if is_image_path(p)]
    text_paths = [p for p in paths if not is_image_path(p)]
    count = len(set(payload.images)) + len(set(image_paths))
    conversation = checked.conversation
    same_rojo = conversation is not None and conversation.rojo_id == checked.rojo.pk
    model = payload.model or (conversation.model if same_rojo else "")
    images_check(rojo=checked.rojo, model=model, count=count)
    pdfs = [{"sha256": p.sha256, "name": pdf_name(p.name)} for p in payload.pdfs]
    pdfs_check(count=len({p["sha256"] for p in pdfs}))
    project_id = checked.access.project.pk
    found: list[dict] = []
    if text_paths or pdfs:
        found += await asyncio.to_thread(
            attachments_read, project_id=project_id, paths=text_paths, pdfs=pdfs
        )
    if count:
        found += await asyncio.to_thread(
            images_gather, project_id=project_id, ids=payload.images, paths=image_paths
        )
    return found or None
