"""The endpoint's HTTP side: /mcp/projects/<project id or slug>, before the SDK's transport.

Per request, in this order: the Host header against ALLOWED_HOSTS (400), an `Origin` header
that is not one of this site's own (403, rojos/mcp_endpoint/origin.py), the body's size
against ROJO_MCP_MAX_BODY_BYTES (413: a declared Content-Length at once, a body sent in
chunks as it arrives, so the SDK never holds more than that in memory), the bearer token
(the SDK's bearer middleware: 401 with WWW-Authenticate for a missing, unknown, expired or
revoked token), the project (404 for one the token's user is not a member of, exactly as
for one that does not exist), an MCP-Protocol-Version the SDK does not speak (400 naming
those it does), a body not sent as JSON (415) and an Accept without JSON (406:
./request_headers.py), a JSON-RPC batch (400 with a JSON-RPC error of its own:
./batches.py), a body that is not one JSON-RPC message (400, -32700 or -32600:
./message_shape.py), then the SDK's streamable HTTP session manager. A client that
closes its connection before its answer cancels its request (./disconnects.py).

The manager is stateless, answering in JSON: every request stands alone, so any server
process can answer any request (no sticky sessions, as for the rest of the app), and each
is authenticated afresh. With no session it never has anything to send outside a POST's
answer, so a GET is 405 (the transport's answer for a server without a GET stream): the
SDK's stateless transport would hold each client's stream open, for nothing, for good. It
is started on the first request of each event loop, as neither uvicorn without lifespan
nor daphne runs an ASGI lifespan.
"""

import asyncio
import contextvars
import io
import json
import re
from datetime import UTC

import anyio
from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.handlers.asgi import ASGIRequest
from django.db import DatabaseError
from django.http.request import split_domain_port, validate_host
from mcp.server.auth.middleware.bearer_auth import (
    AuthenticatedUser,
    BearerAuthBackend,
    RequireAuthMiddleware,
)
from mcp.server.auth.provider import AccessToken
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.authentication import AuthenticationError
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.responses import JSONResponse
from starlette.types import Receive, Scope, Send

from roject.identity.login_limits import client_ip
from roject.identity.tokens import TokenRefused, api_token_check
from roject.models import Membership
from roject.server.db_threads import db_context

from .batches import BodyStart, batch_refuse
from .body_limit import BodyLimit
from .caller import SCOPE_KEY, McpCaller
from .disconnects import ClientGone
from .message_shape import WholeBody, body_checked
from .origin import origin_allowed
from .request_headers import (
    content_type_refuse,
    content_type_refused,
    json_unaccepted,
    json_unaccepted_refuse,
    version_refuse,
    version_unserved,
)
from .server import mcp_server

# With /mcp added too: some clients post to <origin>/mcp unless the address ends in /mcp
# (the MCP Inspector's CLI), or guess the transport from that ending.
PATH = re.compile(r"^/mcp/projects/(?P<ref>[A-Za-z0-9_-]{1,200})(?:/mcp)?/?$")


class _TokenVerifier:
    """The SDK's TokenVerifier over our personal API tokens (roject.identity.tokens)."""

    async def verify_token(self, token: str) -> AccessToken | None:
        try:
            found = await sync_to_async(api_token_check)(token)
        except TokenRefused:
            return None
        except DatabaseError as exc:  # answered 503 by the middleware's on_error
            raise AuthenticationError(_UNAVAILABLE) from exc
        expires = found.expires.astimezone(UTC) if found.expires else None
        return AccessToken(
            token=found.prefix,  # the SDK keeps it in memory only; the prefix names it
            client_id=f"rojo-token-{found.pk}",
            scopes=["read"] if found.read_only else ["read", "write"],
            expires_at=int(expires.timestamp()) if expires else None,
            subject=str(found.user_id),
            claims={"token_id": found.pk, "name": found.name, "read_only": found.read_only},
        )


def _member_project_id(user_id: int, ref: str) -> int | None:
    """(Blocking) The id of the project `ref` (an id or a slug) if the user is a member."""
    memberships = Membership.objects.filter(user_id=user_id)
    if ref.isdigit() and len(ref) <= 18:
        memberships = memberships.filter(project_id=int(ref))
    else:
        memberships = memberships.filter(project__slug=ref)
    return memberships.values_list("project_id", flat=True).first()


_UNAVAILABLE = "The database is busy or unreachable; try again in a moment."


def _unavailable(_conn, exc: AuthenticationError) -> JSONResponse:
    """The database down while a token is checked: 503 and Retry-After, as the API does."""
    return JSONResponse({"error": str(exc)}, status_code=503, headers={"Retry-After": "5"})


async def _answer(send: Send, status: int, message: str, **more: str) -> None:
    """A JSON error answer; `more` adds headers (retry_after="5": Retry-After)."""
    body = json.dumps({"error": message}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    headers += [(name.replace("_", "-").encode(), value.encode()) for name, value in more.items()]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _host_allowed(scope: Scope) -> bool:
    host = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"host"), "")
    domain, _port = split_domain_port(host)
    return bool(domain) and validate_host(domain, settings.ALLOWED_HOSTS)


class McpEndpoint:
    """The ASGI app for /mcp/projects/<project>; roject/asgi.py routes /mcp/ here."""

    def __init__(self) -> None:
        gated = RequireAuthMiddleware(self._project_gate, required_scopes=[])
        self._app = AuthenticationMiddleware(
            gated, backend=BearerAuthBackend(_TokenVerifier()), on_error=_unavailable
        )
        self._loop: asyncio.AbstractEventLoop | None = None
        self._manager: StreamableHTTPSessionManager | None = None
        self._started: asyncio.Event | None = None
        self._task: asyncio.Task | None = None  # held: the loop keeps only a weak reference

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        match = PATH.match(scope["path"])
        if scope["type"] != "http" or match is None:
            return await _answer(send, 404, "Not found.")
        if not _host_allowed(scope):
            return await _answer(send, 400, "Bad request: this host is not allowed.")
        if not origin_allowed(scope):
            return await _answer(send, 403, "Forbidden: requests from this Origin are refused.")
        scope = {**scope, "rojo.project_ref": match["ref"]}
        limit = BodyLimit(settings.ROJO_MCP_MAX_BODY_BYTES, receive, send)
        if limit.declared_over(scope):
            return await _answer(send, 413, limit.message)
        client = ClientGone(limit.receive)
        try:
            async with db_context():
                with anyio.CancelScope() as request:
                    watch = asyncio.ensure_future(client.watch(request))
                    try:
                        await self._app(scope, client.receive, limit.send)
                    finally:
                        watch.cancel()
        except Exception:
            if not limit.over:
                raise
        if limit.over and not limit.started:
            await _answer(send, 413, limit.message)

    async def _project_gate(self, scope: Scope, receive: Receive, send: Send) -> None:
        user: AuthenticatedUser = scope["user"]
        claims = user.access_token.claims or {}
        user_id = int(user.access_token.subject)
        try:
            project_id = await sync_to_async(_member_project_id)(user_id, scope["rojo.project_ref"])
        except DatabaseError:
            return await _answer(send, 503, _UNAVAILABLE, retry_after="5")
        if project_id is None:
            return await _answer(send, 404, "No such project.")
        if scope["method"] == "GET":  # a stateless server has nothing to send on a stream
            return await _answer(send, 405, "This endpoint offers no GET stream.", allow="POST")
        if scope["method"] != "POST":  # no session to DELETE; the SDK's Allow names GET too
            return await _answer(send, 405, "This endpoint takes only POST.", allow="POST")
        if (version := version_unserved(scope)) is not None:
            return await version_refuse(version, send)
        if (sent := content_type_refused(scope)) is not None:
            return await content_type_refuse(sent, send)
        if json_unaccepted(scope):
            return await json_unaccepted_refuse(send)
        body = BodyStart(receive)
        if await body.first_byte() == b"[":
            return await batch_refuse(scope, send)
        whole = WholeBody(body.receive)
        if (text := await whole.read()) is not None:
            if (text := await body_checked(text, send)) is None:
                return
            whole.hold(text)
        scope[SCOPE_KEY] = McpCaller(
            token_id=claims["token_id"],
            token_name=claims["name"],
            user_id=user_id,
            read_only=claims["read_only"],
            project_id=project_id,
            # The client's address as the web's audit entries read it (ROJO_PROXY_COUNT).
            address=client_ip(ASGIRequest(scope, io.BytesIO())),
        )
        manager = await self._manager_running()
        await manager.handle_request(scope, whole.receive, send)

    async def _manager_running(self) -> StreamableHTTPSessionManager:
        """The session manager of this event loop, started on its first request."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            self._loop = loop
            self._manager = StreamableHTTPSessionManager(
                app=mcp_server,
                stateless=True,
                json_response=True,
                # Ours is checked first (BodyLimit); the SDK's own, 4 MiB, must not be lower.
                max_request_body_size=settings.ROJO_MCP_MAX_BODY_BYTES,
            )
            self._started = asyncio.Event()
            # A fresh context: the manager outlives the request that happens to start it.
            self._task = loop.create_task(
                self._run(self._manager, self._started), context=contextvars.Context()
            )
        await self._started.wait()
        return self._manager

    @staticmethod
    async def _run(manager: StreamableHTTPSessionManager, started: asyncio.Event) -> None:
        async with manager.run():
            started.set()
            await asyncio.Event().wait()  # until the loop ends


application = McpEndpoint()
