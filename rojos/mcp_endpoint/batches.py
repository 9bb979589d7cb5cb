"""A JSON-RPC batch (a body that is an array) refused with a JSON-RPC error of its own.

MCP 2025-03-26 allowed batches and 2025-06-18 took them out; the SDK's transport reads one
message per POST, and a batch got its validation error, four pydantic reports long (code
-32602, invalid params). The endpoint looks at the body's first byte that is not
whitespace, before the SDK reads it, and answers an array with 400 and -32600 (invalid
request), saying what to send instead. The bytes looked at are given back to the SDK
first; what is read goes through the body limit (./body_limit.py) as ever.
"""

from mcp_types import INVALID_REQUEST
from mcp_types.version import is_version_at_least
from starlette.types import Message, Receive, Scope, Send

from .rpc_errors import rpc_error_send

_WHITESPACE = b" \t\r\n"  # JSON's own


class BodyStart:
    """A request's receive, with the body read up to its first byte that is not
    whitespace and held, to be given to the app before the rest."""

    def __init__(self, receive: Receive) -> None:
        self._receive = receive
        self._held: list[Message] = []

    async def first_byte(self) -> bytes:
        """The body's first byte that is not whitespace; b"" for none (an empty body, or a
        client gone or cut off at the limit)."""
        while True:
            message = await self._receive()
            if message["type"] != "http.request":
                self._held.append(message)
                return b""
            if start := message.get("body", b"").lstrip(_WHITESPACE):
                self._held.append(message)
                return start[:1]
            if not message.get("more_body", False):
                self._held.append(message)
                return b""
            # Whitespace before the JSON is nothing to it: dropped, not held (a body sent a
            # byte at a time would hold a message of some 300 bytes for each byte).

    async def receive(self) -> Message:
        if self._held:
            return self._held.pop(0)
        return await self._receive()


def _message(scope: Scope) -> str:
    """What to tell the client, by the protocol version it names (none: 2025-03-26)."""
    version = next(
        (v.decode("latin-1") for k, v in scope["headers"] if k == b"mcp-protocol-version"), ""
    )
    instead = "send each message in a POST of its own"
    if is_version_at_least(version, "2025-06-18"):
        return f"JSON-RPC batches are not part of MCP {version}: {instead}"
    return f"This server takes no JSON-RPC batches: {instead}"


async def batch_refuse(scope: Scope, send: Send) -> None:
    """Answer a batch: 400, a JSON-RPC error with no id (a batch has none of its own)."""
    await rpc_error_send(send, code=INVALID_REQUEST, message=_message(scope))
