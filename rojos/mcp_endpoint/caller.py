"""Who is calling, as the endpoint's HTTP side found it, and how the handlers read it."""

from dataclasses import dataclass

from mcp.server import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_REQUEST

# The key under which the HTTP side leaves the caller in the request's ASGI scope.
SCOPE_KEY = "rojo.mcp_caller"


@dataclass(frozen=True, slots=True, kw_only=True)
class McpCaller:
    """A live token's user, a member of the project in the URL (checked per request)."""

    token_id: int
    token_name: str
    user_id: int
    read_only: bool
    project_id: int
    address: str | None = None  # the client's, for the audit log (None: no IP address)


def caller_of(ctx: ServerRequestContext) -> McpCaller:
    """The caller of the request a handler serves; it came through the endpoint's gate."""
    request = ctx.request
    caller = request.scope.get(SCOPE_KEY) if request is not None else None
    if not isinstance(caller, McpCaller):  # not through /mcp/projects/<project>
        raise MCPError(code=INVALID_REQUEST, message="Not served through a project's endpoint.")
    return caller
