"""Connect and disconnect: a person's (or, for the shared connection, an admin's) account on
an MCP server that asks for OAuth.

`sign_in_begin` opens an MCP session with the SDK's client as a turn would; a server that
answers without asking for a sign-in (the account's tokens still good, or refreshed) needs no
browser. Otherwise the SDK discovers, registers where it must, and builds the authorization
URL, where the flow pauses (`provider`); what it needs to finish is kept sealed
(`pending`). `sign_in_finish` runs at Rojo's callback, in whichever process it lands.
A finished sign-in and a disconnect are audited (`audit`).
"""

import asyncio
import logging
from contextlib import AsyncExitStack
from pathlib import Path

import httpx2
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import transaction
from mcp.client.auth import OAuthFlowError
from mcp.shared.exceptions import MCPError

from roject.audit.log import AuditAction, AuditActor
from roject.errors import AppError

from ..accounts import account_disconnect
from ..destinations import REFUSED, DestinationRefused
from ..spec import ServerSpec
from ..transport import client_make
from .audit import account_audit, registration_of
from .pending import Pending, pending_store, pending_take
from .provider import account_provider

logger = logging.getLogger("rojos.mcp")


class ConnectError(AppError):
    """A sign-in that could not be made; the message is for the person (it names the
    server, never its URL or a token)."""


async def sign_in_begin(
    *,
    spec: ServerSpec,
    user_id: int,
    shared: bool,
    session_key: str,
    redirect_uri: str,
    client_metadata_url: str | None = None,
) -> str | None:
    """Where to send the person's browser to sign in, or None when the account is signed
    in already. `user_id` started it; the account is theirs, or the shared one.

    `client_metadata_url`, the https URL of Rojo's client ID metadata document, is offered
    to a provider that supports one when no credentials were set (the admin's win); the
    SDK refuses an http one, so a site served over http passes None and registers
    dynamically where the provider allows it."""
    provider = account_provider(
        spec=spec,
        user_id=None if shared else user_id,
        redirect_uri=redirect_uri,
        pausing=True,
        client_metadata_url=client_metadata_url,
    )
    try:
        # A server that does not answer does not hold the person's request for long.
        async with asyncio.timeout(settings.ROJO_MCP_START_TIMEOUT), AsyncExitStack() as stack:
            client = client_make(
                spec=spec, root=Path("/"), pipe=None, stack=stack, on_message=None, auth=provider
            )
            await stack.enter_async_context(client)
    except BaseException as exc:  # what the SDK's task groups raise around the pause
        if provider.paused is None:
            if not isinstance(exc, Exception):
                raise
            logger.warning("signing in to MCP server %s failed", spec.slug, exc_info=exc)
            raise ConnectError(_why(spec, exc)) from None
    if provider.paused is None:
        return None
    paused = provider.paused
    await sync_to_async(pending_store)(
        state=paused.state,
        server_id=spec.server_id,
        user_id=user_id,
        session_key=session_key,
        shared=shared,
        flow=paused.flow,
    )
    return paused.authorization_url


def sign_in_pending(*, user_id: int, session_key: str, state: str) -> Pending:
    """(Blocking) The sign-in `state` names, used up: only the person and login session
    that began it, once, within its time."""
    pending = pending_take(state=state, user_id=user_id, session_key=session_key)
    if pending is None:
        raise ConnectError(
            "This sign-in is not one you started here, or it took too long: press Connect again."
        )
    return pending


async def sign_in_finish(
    *,
    spec: ServerSpec,
    pending: Pending,
    user_id: int,
    code: str,
    iss: str | None,
    actor: AuditActor,
) -> None:
    """Finish the sign-in with the code the browser brought back: the SDK's token exchange,
    the tokens sealed into the account (the person's, or the shared one), `actor`'s
    connection audited."""
    provider = account_provider(
        spec=spec,
        user_id=None if pending.shared else user_id,
        redirect_uri=pending.flow["redirect_uri"],
        finishing=True,
    )
    try:
        await provider.finish(flow=pending.flow, code=code, iss=iss)
    except (OAuthFlowError, httpx2.HTTPError, ValueError, DestinationRefused) as exc:
        logger.warning("finishing the sign-in to MCP server %s failed", spec.slug, exc_info=exc)
        raise ConnectError(_why(spec, exc)) from None
    await sync_to_async(account_audit)(
        action=AuditAction.MCP_ACCOUNT_CONNECTED,
        actor=actor,
        spec=spec,
        shared=pending.shared,
        details={"registration": registration_of(spec=spec, flow=pending.flow)},
    )


def account_forget(*, spec: ServerSpec, user_id: int | None, actor: AuditActor) -> bool:
    """(Blocking) Disconnect: the account's tokens deleted (sessions holding them stop at
    their next call, which finds no account), audited in the same transaction when there
    was one; whether there was."""
    with transaction.atomic():
        forgotten = account_disconnect(server_id=spec.server_id, user_id=user_id)
        if forgotten:
            account_audit(
                action=AuditAction.MCP_ACCOUNT_DISCONNECTED,
                actor=actor,
                spec=spec,
                shared=user_id is None,
            )
    return forgotten


def _why(spec: ServerSpec, exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, DestinationRefused):
        why = REFUSED
    elif isinstance(exc, httpx2.TransportError):
        why = "it cannot be reached"
    elif isinstance(exc, TimeoutError):
        why = "it did not answer in time"
    elif isinstance(exc, OAuthFlowError):
        why = f"its sign-in failed ({exc.__class__.__name__})"
    elif isinstance(exc, MCPError):
        why = "it refused the connection"
    else:
        why = f"it answered what Rojo cannot use ({exc.__class__.__name__})"
    return f"Connecting to {spec.name!r} failed: {why}. The log has the details."
