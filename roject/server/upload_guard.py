"""Request bodies over their limit, or that stall, are cut as they arrive.

Django's ASGI handler reads a request's whole body (into a temporary file, on disk past
FILE_UPLOAD_MAX_MEMORY_SIZE) before any middleware or view runs, whatever its size, so a
view's own limit would come only after a client had sent, and the server stored,
everything: anyone could fill the disk with one POST to the login page. This guard sits in
front of it for every request: a declared `Content-Length` over the limit is answered 413
at once; a body sent in chunks is counted as it arrives and, past the limit, dropped (Django
sees the client leave, and removes what it had spooled) and answered 413. A body that sends
nothing for ROJO_UPLOAD_STALL_SECONDS is dropped the same way and answered 408. Each of
these answers closes the connection (`Connection: close`), so the client stops sending.

The limit is, for the upload endpoint, ROJO_UPLOAD_MAX_FILE_BYTES for a file (the body is
the file) and ROJO_UPLOAD_MAX_BYTES for a .zip to unpack, for the image endpoint
ROJO_MAX_IMAGE_BYTES, for the PDF endpoint ROJO_MAX_PDF_BYTES; for everything else what Django
would read anyway: DATA_UPLOAD_MAX_MEMORY_SIZE, plus FRAMING_BYTES for a form's multipart
boundaries (Django counts only the fields). Who may upload at all is decided before any of
this, from the headers (roject/server/upload_gate.py). /mcp/ has its own limit
(rojos/mcp_endpoint/body_limit.py).
"""

import asyncio
import json
import re
from urllib.parse import parse_qsl

from django.conf import settings

from roject.server.metrics import upload_bytes

UPLOAD_PATH = re.compile(r"^/api/projects/\d+/files/upload$")
# An image for the message box (rojos/web/images_api.py): an upload too, of one image.
IMAGE_PATH = re.compile(r"^/api/projects/\d+/images$")
# A PDF for the message box (rojos/web/pdfs_api.py): an upload of one PDF.
PDF_PATH = re.compile(r"^/api/projects/\d+/pdfs$")
# Room for a multipart form's boundaries and part headers, which Django does not count.
FRAMING_BYTES = 1 << 20
# What the API reads as a yes for a flag in the query string (pydantic's words for true).
_YES = frozenset({"1", "on", "t", "true", "y", "yes"})


def is_upload(scope) -> bool:
    """Whether the request is an upload (POST to the upload, the image or the PDF endpoint)."""
    path = scope["path"]
    return scope["method"] == "POST" and any(
        pattern.match(path) for pattern in (UPLOAD_PATH, IMAGE_PATH, PDF_PATH)
    )


def _length(scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length" and value.isdigit():
            return int(value)
    return None


def _unpacks(scope) -> bool:
    query = parse_qsl(scope.get("query_string", b"").decode("latin-1"))
    return any(name == "unpack" and value.strip().lower() in _YES for name, value in query)


def _limit(scope) -> tuple[int | None, str]:
    """The path's body limit (None: none) and what its refusal calls the body."""
    if is_upload(scope) and IMAGE_PATH.match(scope["path"]):
        return settings.ROJO_MAX_IMAGE_BYTES, "image"
    if is_upload(scope) and PDF_PATH.match(scope["path"]):
        return settings.ROJO_MAX_PDF_BYTES, "PDF"
    if is_upload(scope):
        if _unpacks(scope):
            return settings.ROJO_UPLOAD_MAX_BYTES, "upload"
        return min(settings.ROJO_UPLOAD_MAX_FILE_BYTES, settings.ROJO_UPLOAD_MAX_BYTES), "file"
    django_limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    return (None if django_limit is None else django_limit + FRAMING_BYTES), "request"


async def refuse(send, status: int, detail: str, *, headers=()) -> None:
    """Answer `{"detail": …}` with `status` and close the connection: the server does not
    wait for (or read) the rest of a body the client may still be sending."""
    body = json.dumps({"detail": detail}).encode()
    head = [
        (b"content-type", b"application/json"),
        (b"content-length", b"%d" % len(body)),
        (b"connection", b"close"),
        *headers,
    ]
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": body})


async def _dropped() -> None:
    """A message the guard does not pass on."""


class UploadSizeGuard:
    """ASGI middleware: every request's body limit and stall time, enforced on the wire."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        limit, what = _limit(scope)
        stall = settings.ROJO_UPLOAD_STALL_SECONDS or None
        if limit is None and stall is None:
            return await self.app(scope, receive, send)
        length = _length(scope)
        if limit is not None and length is not None and length > limit:
            return await refuse(send, 413, f"the {what} is over the limit of {limit:,} bytes")
        received, refusal, started, whole = 0, None, False, False

        async def counted():
            nonlocal received, refusal, whole
            if whole:  # the body is in: what comes now is the client leaving, whenever
                return await receive()
            try:
                async with asyncio.timeout(stall):
                    message = await receive()
            except TimeoutError:
                refusal = 408, f"the {what}'s body sent nothing for {stall:g} s, so it was cut"
                return {"type": "http.disconnect"}
            if message["type"] == "http.request":
                whole = not message.get("more_body", False)
                received += len(message.get("body", b""))
                if limit is not None and received > limit:
                    refusal = 413, f"the {what} is over the limit of {limit:,} bytes"
                    return {"type": "http.disconnect"}
            return message

        def watched(message):  # send's awaitable, not a coroutine per chunk (write_timeout)
            nonlocal started
            if refusal and not started:
                return _dropped()  # the app answers a client it thinks has left: the guard does
            started = started or message["type"] == "http.response.start"
            return send(message)

        await self.app(scope, counted, watched)
        if what != "request":
            upload_bytes.inc(received)
        if refusal and not started:
            await refuse(send, *refusal)
