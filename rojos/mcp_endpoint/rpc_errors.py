"""A JSON-RPC error answered by the endpoint itself, before the SDK reads the request.

One shape for each refusal of ours (a batch, a protocol version, a body that is no
message): `id` null, as the request's id is not read (or not there), and the HTTP status
the transport's rules give; the SDK's client reads it as the answer to its request.
"""

import json
from typing import Any

from starlette.types import Send


async def rpc_error_send(
    send: Send, *, code: int, message: str, data: Any = None, status: int = 400
) -> None:
    """Answer `status` with one JSON-RPC error with no id."""
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": error}, separators=(",", ":"))
    body = body.encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
