"""Sign-ins under way (`McpSignInPending`): what the callback needs, sealed, for minutes.

The row is found by a digest of the OAuth `state` the SDK made (the state itself, like the
PKCE verifier, is never stored in clear), and is given only to the person and the login
session that started the sign-in, once: a second use, another person's or another
session's callback finds nothing.
"""

import hashlib
import hmac
import json
from dataclasses import dataclass
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from ...models import McpSignInPending
from ..sealed import seal, unseal

PENDING_SECONDS = 600  # from the Connect button to the provider's redirect back


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


@dataclass(frozen=True, slots=True, kw_only=True)
class Pending:
    server_id: int
    shared: bool
    flow: dict


def pending_store(
    *, state: str, server_id: int, user_id: int, session_key: str, shared: bool, flow: dict
) -> None:
    """(Blocking) Keep a sign-in under way; those past their time are dropped."""
    now = timezone.now()
    McpSignInPending.objects.filter(expires__lt=now).delete()
    McpSignInPending.objects.create(
        state_digest=_digest(state),
        server_id=server_id,
        user_id=user_id,
        session_digest=_digest(session_key),
        shared=shared,
        flow=seal(json.dumps(flow).encode()),
        expires=now + timedelta(seconds=PENDING_SECONDS),
    )


def pending_take(*, state: str, user_id: int, session_key: str) -> Pending | None:
    """(Blocking) The sign-in `state` names, if this person in this session started it and
    its time has not run out; it is used up either way once found for them."""
    if not state or not session_key:
        return None
    with transaction.atomic():
        found = McpSignInPending.objects.select_for_update().filter(state_digest=_digest(state))
        row = found.first()
        if row is None or row.user_id != user_id:
            return None
        if not hmac.compare_digest(row.session_digest, _digest(session_key)):
            return None
        row.delete()
    if row.expires < timezone.now():
        return None
    opened = unseal(row.flow)
    if opened is None:
        return None
    return Pending(server_id=row.server_id, shared=row.shared, flow=json.loads(opened))


def pending_of_server_delete(*, server_id: int) -> None:
    """(Blocking) Drop every sign-in under way to the server."""
    McpSignInPending.objects.filter(server_id=server_id).delete()
