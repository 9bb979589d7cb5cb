"""An `MCP-Protocol-Version` header naming a version the SDK does not speak: 400, saying
which it does.

The transport's rule (basic/transports, "Protocol Version Header"): a server MUST answer
an invalid or unsupported version with 400 Bad Request. The SDK sends every version it
does not know down its 2026-07-28 path, whose checks first ask for that protocol's
`params._meta`, so a 2025 client naming a wrong version was told about a `_meta` it never
had to send. The answer is the 2026 protocol's own error, -32022 with the versions
served in `data.supported`: the SDK's client picks one from it and tries again.
"""

from mcp_types import UNSUPPORTED_PROTOCOL_VERSION
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from starlette.types import Scope, Send

from .rpc_errors import rpc_error_send

SERVED = (*HANDSHAKE_PROTOCOL_VERSIONS, *MODERN_PROTOCOL_VERSIONS)
_SHOWN = 64  # of a version named: a header may be kilobytes long


def version_unserved(scope: Scope) -> str | None:
    """The request's MCP-Protocol-Version if one (of any it sends) is not served, else None."""
    named = [v.decode("latin-1") for k, v in scope["headers"] if k == b"mcp-protocol-version"]
    return next((version for version in named if version not in SERVED), None)


async def version_refuse(version: str, send: Send) -> None:
    """Answer 400 with -32022, naming the versions served."""
    shown = version[:_SHOWN] + ("…" if len(version) > _SHOWN else "")
    message = (
        f"Unsupported protocol version {shown!r} (MCP-Protocol-Version): this server speaks "
        f"{', '.join(SERVED)}"
    )
    data = {"supported": list(SERVED), "requested": shown}
    await rpc_error_send(send, code=UNSUPPORTED_PROTOCOL_VERSION, message=message, data=data)
