"""Bearer tokens on the REST API, beside the browser's session.

A request with `Authorization: Bearer rojo_…` is its token's user's, and needs no CSRF
token (a browser never sends that header by itself, so no other site can make it send
one); without the header, the session and its CSRF check apply as before. A bad token is
refused outright, never tried as a session. A read-only token may only read.

For an async endpoint, django-ninja would run each auth on a database thread (a trip
there and back); these run on the event loop what needs no I/O (the header, the CSRF
check) and cross only to read the token or the session's user: a request without a token
makes one trip for its auth, not two. A sync endpoint calls them on its thread, as before.
"""

import asyncio

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest
from ninja.security import HttpBearer
from ninja.security.session import SessionAuth

from roject.identity.tokens import TokenRefused, api_token_check
from roject.server.loop_middleware import multipart_post

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def _on_the_loop() -> bool:
    """Whether the caller runs on the event loop (an async endpoint), not on a thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


class _LoopAware:
    """Marked async for ninja, which then calls it as it is: on the loop its answer is a
    coroutine or None, on a thread (a sync endpoint) the user or None."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.is_async = True  # ninja's AuthBase sets it from `authenticate`, sync here


class ApiTokenAuth(_LoopAware, HttpBearer):
    """django-ninja auth: the user of a live personal API token (roject.identity.tokens)."""

    def __call__(self, request: HttpRequest):
        header = request.headers.get("Authorization", "")
        if header and not header.lower().startswith("bearer "):
            raise TokenRefused("Send the token as `Authorization: Bearer <token>`.")
        if not _on_the_loop():
            return super().__call__(request)
        if not header:
            return None  # the session's turn, no trip for it
        return sync_to_async(super().__call__)(request)

    def authenticate(self, request: HttpRequest, token: str):
        found = api_token_check(token.strip())
        if found.read_only and request.method not in SAFE_METHODS:
            raise PermissionDenied("This API token is read-only.")
        request.api_token = found
        return found.user


class ApiSessionAuth(_LoopAware, SessionAuth):
    """django-ninja's session auth (its CSRF check, then the session's user), the CSRF
    check on the loop unless it may do I/O (CSRF_USE_SESSIONS, a multipart form's token)."""

    def __call__(self, request: HttpRequest):
        if not _on_the_loop():
            return super().__call__(request)
        if settings.CSRF_USE_SESSIONS or multipart_post(request):
            return sync_to_async(super().__call__)(request)
        key = self._get_key(request)  # the CSRF check: HttpError 403 when it fails
        return sync_to_async(self.authenticate)(request, key)  # the session and its user


token_auth = ApiTokenAuth()
session_auth = ApiSessionAuth()
