"""Whether a long-lived stream's request is still signed in, checked again while it runs.

A stream (server-sent events) outlives the request that opened it: its user may sign out,
change their password (which ends their other sessions), be made inactive, or revoke the
API token it came with. Each check reads the session store or the token again, so a
stream ends within one check interval of any of these. A check only reads: a session's
cached copy missing is not put back (as loading it would), lest a check racing a logout
bring back the session the logout deleted.
"""

import contextlib
import time
from importlib import import_module

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth import HASH_SESSION_KEY, SESSION_KEY, get_user_model
from django.http import HttpRequest
from django.utils.crypto import constant_time_compare

from roject.identity.tokens import aapi_token_alive
from roject.members.access import astill_member


def _session_signed_in(session_key: str | None, user_id: int) -> bool:
    """(Blocking) Whether the session is still in the store, of this user, with the hash
    of the user's password as it is now (as django.contrib.auth.get_user checks)."""
    if not session_key:
        return False
    store = import_module(settings.SESSION_ENGINE).SessionStore(session_key=session_key)
    # Nothing for a session that was flushed or expired; read only (roject.identity.sessions).
    data = store.peek() if hasattr(store, "peek") else store.load()
    if data.get(SESSION_KEY) != str(user_id):
        return False
    user = get_user_model().objects.filter(pk=user_id, is_active=True).first()
    if user is None:
        return False
    stored = data.get(HASH_SESSION_KEY) or ""
    hashes = [user.get_session_auth_hash(), *user.get_session_auth_fallback_hash()]
    return any(constant_time_compare(stored, known) for known in hashes)


async def asession_signed_in(*, session_key: str | None, user_id: int) -> bool:
    """Whether the login session is still signed in as the user, with the user's password
    as it is now: False once logged out, expired, or the password changed."""
    return await sync_to_async(_session_signed_in)(session_key, user_id)


def live_auth_check(request: HttpRequest, *, user):
    """An async check, to call again as the stream goes on, of whether the request that
    opened it (with a session or an API token, as `user`) is still signed in."""
    token = getattr(request, "api_token", None)
    token_id = token.pk if token is not None else None
    session = getattr(request, "session", None)
    session_key = session.session_key if session is not None else None
    user_id = user.pk

    async def signed_in() -> bool:
        if token_id is not None:
            return await aapi_token_alive(token_id=token_id)
        return await asession_signed_in(session_key=session_key, user_id=user_id)

    return signed_in


def live_access_check(request: HttpRequest, *, user, project_id: int):
    """An async check, as live_auth_check, that the request is still signed in and its user
    still an active member of the project: for a stream of one project's news or turns."""
    signed_in = live_auth_check(request, user=user)

    async def allowed() -> bool:
        return await signed_in() and await astill_member(user=user, project_id=project_id)

    return allowed


async def checked_stream(events, *, allowed, every: float):
    """`events` as they come, ending, with nothing more sent, at the first one that finds
    `allowed()` False; checked again at most every `every` seconds (one query or two)."""
    checked = time.monotonic()
    async with contextlib.aclosing(events):
        async for event in events:
            if time.monotonic() - checked >= every:
                if not await allowed():
                    return
                checked = time.monotonic()
            yield event
