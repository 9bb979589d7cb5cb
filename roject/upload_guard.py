"""Request bodies over their limit are refused before they are received.

Django's ASGI handler reads a request's whole body (into a temporary file, on disk past
FILE_UPLOAD_MAX_MEMORY_SIZE) before any middleware or view runs, whatever its size, so a
view's own limit would come only after a client had sent, and the server stored,
everything: anyone could fill the disk with one POST to the login page. This guard sits in
front of it for every request: a declared `Content-Length` over the limit is answered 413
at once; a body sent in chunks is counted as it arrives and, past the limit, dropped (Django
sees the client leave) and answered 413.

The limit is ROJO_UPLOAD_MAX_BYTES for the upload endpoint, and for everything else what
Django would read anyway: DATA_UPLOAD_MAX_MEMORY_SIZE, plus FRAMING_BYTES for a form's
multipart boundaries (Django counts only the fields). /mcp/ has its own limit
(rojos/mcp_endpoint/body_limit.py).
"""

import json
import re

from django.conf import settings

_UPLOAD = re.compile(r"^/api/projects/\d+/files/upload$")
# Room for a multipart form's boundaries and part headers, which Django does not count.
FRAMING_BYTES = 1 << 20


def _length(scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length" and value.isdigit():
            return int(value)
    return None


def _limit(scope) -> tuple[int | None, str]:
    """The path's body limit (None: none) and what its refusal calls the body."""
    if scope["method"] == "POST" and _UPLOAD.match(scope["path"]):
        return settings.ROJO_UPLOAD_MAX_BYTES, "upload"
    django_limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    return (None if django_limit is None else django_limit + FRAMING_BYTES), "request"


async def _refuse(send, limit: int, what: str) -> None:
    detail = f"the {what} is over the limit of {limit:,} bytes"
    body = json.dumps({"detail": detail}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": 413, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class UploadSizeGuard:
    """ASGI middleware: every request's body limit, enforced on the wire."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        limit, what = _limit(scope)
        if limit is None:
            return await self.app(scope, receive, send)
        length = _length(scope)
        if length is not None and length > limit:
            return await _refuse(send, limit, what)
        received, over, started = 0, False, False

        async def counted():
            nonlocal received, over
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    over = True
                    return {"type": "http.disconnect"}
            return message

        async def watched(message):
            nonlocal started
            if over and not started:
                return  # the app answers a client it thinks has left: the guard answers
            started = started or message["type"] == "http.response.start"
            await send(message)

        await self.app(scope, counted, watched)
        if over and not started:
            await _refuse(send, limit, what)
