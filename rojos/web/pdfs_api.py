"""PDFs for the message box: uploaded before their message is sent, served back for the chip
in a user's bubble.

Any member may upload (a viewer chats in their own conversations, as with images): who may is
decided before the body is read (roject/server/upload_gate.py), the body is cut past
ROJO_MAX_PDF_BYTES as it arrives (roject/server/upload_guard.py). A PDF is kept only once its
reader (roject/documents, a limited child process) has opened it, so a broken or encrypted one
is refused in the message box, before any message; the chat request then names it
(`ChatIn.pdfs`). Serving one is a download (`attachment`, `nosniff`, a CSP that runs nothing):
the app never shows a PDF as its own page.
"""

import asyncio
from urllib.parse import quote

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from ninja import Router, Schema

from roject import storage
from roject.api_answers import answers
from roject.members.access import aproject_access
from roject.server.upload_gate import upload_preflight
from rojos.provider.attachments import pdf_name, pdf_upload

router = Router(tags=["pdfs"])


class PdfOut(Schema):
    sha256: str
    type: str
    name: str
    size: int
    pages: int


@router.post("/{int:project_id}/pdfs", response=answers(PdfOut, 400, 403, 404, 413))
async def pdf_upload_endpoint(request: HttpRequest, project_id: int, name: str = ""):
    """Upload one PDF as the request's body (`name`: how the message shows it), for a message
    to attach by its `sha256`. Over ROJO_MAX_PDF_BYTES: 413; not a PDF, broken or encrypted:
    400, and nothing is kept."""
    access = await aproject_access(user=request.auth, project_id=project_id)
    if (go_ahead := upload_preflight(request)) is not None:
        return go_ahead  # the ASGI gate asked, before the body came
    limit = settings.ROJO_MAX_PDF_BYTES

    def keep() -> dict:
        data = request.read(limit + 1)
        return pdf_upload(project_id=access.project.pk, data=data, name=name)

    return await asyncio.to_thread(keep)


@router.get("/{int:project_id}/pdfs/{sha256}", response=answers(None, 404))
async def pdf_show(request: HttpRequest, project_id: int, sha256: str, name: str = ""):
    """A PDF attached to a message of the project, as a download named `name`."""
    access = await aproject_access(user=request.auth, project_id=project_id)
    try:
        data = await asyncio.to_thread(
            storage.pdf_read, project_id=access.project.pk, sha256=sha256
        )
    except storage.StorageError:
        raise Http404("No such PDF.") from None
    response = HttpResponse(data, content_type="application/pdf")
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = "default-src 'none'; sandbox"
    filename = quote(pdf_name(name or f"{sha256[:12]}.pdf"))
    response["Content-Disposition"] = f"attachment; filename*=UTF-8''{filename}"
    # Its name is its content: the same name never serves other bytes.
    response["Cache-Control"] = "private, max-age=31536000, immutable"
    return response
