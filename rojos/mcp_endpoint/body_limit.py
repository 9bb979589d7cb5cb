"""The MCP endpoint's body size limit, enforced on the wire before the SDK reads the body.

The SDK reads a request's whole body into memory (then into pydantic) before it looks at
it, and /mcp/ is routed around Django and its DATA_UPLOAD_MAX_MEMORY_SIZE: without this,
any live token could make a worker hold a body of any size. A declared Content-Length
over the limit is refused at once; a body sent in chunks is counted as it arrives and,
past the limit, cut off (the SDK sees the client leave) and answered 413.
"""

from starlette.types import Message, Receive, Scope, Send


class BodyLimit:
    """The receive and send of one request, with its body counted against `limit`."""

    def __init__(self, limit: int, receive: Receive, send: Send) -> None:
        self.limit, self._receive, self._send = limit, receive, send
        self.received, self.over, self.started = 0, False, False
        self.message = f"Request body over the limit of {limit:,} bytes."

    def declared_over(self, scope: Scope) -> bool:
        for name, value in scope.get("headers", []):
            if name == b"content-length":
                return value.isdigit() and int(value) > self.limit  # bytes: ASCII digits only
        return False

    async def receive(self) -> Message:
        if self.over:
            return {"type": "http.disconnect"}
        message = await self._receive()
        if message["type"] == "http.request":
            self.received += len(message.get("body", b""))
            if self.received > self.limit:
                self.over = True
                return {"type": "http.disconnect"}
        return message

    async def send(self, message: Message) -> None:
        if self.over and not self.started:
            return  # the app answers a client it thinks has left: the endpoint answers 413
        self.started = self.started or message["type"] == "http.response.start"
        await self._send(message)
