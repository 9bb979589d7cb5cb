"""Uploads over the size limit are refused before their body is received.

Django's ASGI handler reads a request's whole body (into a temporary file) before the view
runs, so the view's own limit would come only after a client had sent, and the server
stored, everything. This guard sits in front of it for the upload endpoint: a declared
`Content-Length` over ROJO_UPLOAD_MAX_BYTES is answered 413 at once; a body sent in chunks
is counted as it arrives and, past the limit, dropped (Django sees the client leave) and
answered 413.
"""

import json
import re

from django.conf import settings

_UPLOAD = re.compile(r"^/api/projects/\d+/files/upload$")


def _length(scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length" and value.isdigit():
            return int(value)
    return None


async def _refuse(send, limit: int) -> None:
    body = json.dumps({"detail": f"the upload is over the limit of {limit:,} bytes"}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": 413, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class UploadSizeGuard:
    """ASGI middleware: the upload endpoint's size limit, enforced on the wire."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] != "POST" or not _UPLOAD.match(scope["path"]):
            return await self.app(scope, receive, send)
        limit = settings.ROJO_UPLOAD_MAX_BYTES
        length = _length(scope)
        if length is not None and length > limit:
            return await _refuse(send, limit)
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
            await _refuse(send, limit)
