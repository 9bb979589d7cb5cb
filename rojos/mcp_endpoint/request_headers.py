"""What a request's headers must say before its body is read: a protocol version the SDK
speaks, a body in JSON, and an answer in JSON accepted. Each refusal is a JSON-RPC error
saying what to send instead.

A version: the transport's rule (basic/transports, "Protocol Version Header") is that a
server MUST answer an invalid or unsupported version with 400 Bad Request. The SDK sends
every version it does not know down its 2026-07-28 path, whose checks first ask for that
protocol's `params._meta`, so a 2025 client naming a wrong version was told about a
`_meta` it never had to send. The answer is the 2026 protocol's own error, -32022 with the
versions served in `data.supported`: the SDK's client picks one from it and tries again.

A body's type: the SDK's transport security answered any but application/json with a
bare 400 in plain text ("Invalid Content-Type header"), no JSON-RPC error and no word of
what to send; it is 415 with one, as the SDK's transport meant to answer.

An answer's type: the transport asks clients to accept application/json and
text/event-stream; this endpoint answers in JSON, so it needs the first (or a wildcard).
The SDK answered a client that did not accept it with a JSON-RPC error at 2025 versions,
but with a bare 406, no body, at 2026-07-28; both are the first now.
"""

from mcp_types import INVALID_REQUEST, UNSUPPORTED_PROTOCOL_VERSION
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from starlette.types import Scope, Send

from ..tools import echoed
from .rpc_errors import rpc_error_send

SERVED = (*HANDSHAKE_PROTOCOL_VERSIONS, *MODERN_PROTOCOL_VERSIONS)
_SHOWN = 64  # of a value named: a header may be kilobytes long


def _shown(value: str) -> str:
    return echoed(value, _SHOWN)


def version_unserved(scope: Scope) -> str | None:
    """The request's MCP-Protocol-Version if one (of any it sends) is not served, else None."""
    named = [v.decode("latin-1") for k, v in scope["headers"] if k == b"mcp-protocol-version"]
    return next((version for version in named if version not in SERVED), None)


async def version_refuse(version: str, send: Send) -> None:
    """Answer 400 with -32022, naming the versions served."""
    message = (
        f"Unsupported protocol version {_shown(version)!r} (MCP-Protocol-Version): this "
        f"server speaks {', '.join(SERVED)}"
    )
    data = {"supported": list(SERVED), "requested": _shown(version)}
    await rpc_error_send(send, code=UNSUPPORTED_PROTOCOL_VERSION, message=message, data=data)


def content_type_refused(scope: Scope) -> str | None:
    """The request's Content-Type ("" for none) unless it is JSON, as the SDK reads it."""
    sent = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"content-type"), "")
    return None if sent.lower().startswith("application/json") else sent


async def content_type_refuse(sent: str, send: Send) -> None:
    """Answer 415 with -32600, saying to send JSON."""
    named = f"Content-Type {_shown(sent)!r}" if sent else "No Content-Type"
    message = f"{named}: send the JSON-RPC message as application/json"
    await rpc_error_send(send, code=INVALID_REQUEST, message=message, status=415)


def json_unaccepted(scope: Scope) -> bool:
    """Whether the request's Accept leaves out JSON (as the SDK reads it: */*,
    application/* and application/json take it; no Accept does not)."""
    sent = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"accept"), "")
    types = {part.split(";")[0].strip().lower() for part in sent.split(",")}
    return not types & {"*/*", "application/*", "application/json"}


async def json_unaccepted_refuse(send: Send) -> None:
    """Answer 406 with -32600, saying what to accept."""
    message = "Not Acceptable: accept application/json and text/event-stream (Accept header)"
    await rpc_error_send(send, code=INVALID_REQUEST, message=message, status=406)
