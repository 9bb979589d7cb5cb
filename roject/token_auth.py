"""Bearer tokens on the REST API, beside the browser's session.

A request with `Authorization: Bearer rojo_…` is its token's user's, and needs no CSRF
token (a browser never sends that header by itself, so no other site can make it send
one); without the header, the session and its CSRF check apply as before. A bad token is
refused outright, never tried as a session. A read-only token may only read.
"""

from django.core.exceptions import PermissionDenied
from django.http import HttpRequest
from ninja.security import HttpBearer

from .tokens import TokenRefused, api_token_check

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


class ApiTokenAuth(HttpBearer):
    """django-ninja auth: the user of a live personal API token (roject.tokens)."""

    def __call__(self, request: HttpRequest):
        header = request.headers.get("Authorization", "")
        if header and not header.lower().startswith("bearer "):
            raise TokenRefused("Send the token as `Authorization: Bearer <token>`.")
        return super().__call__(request)

    def authenticate(self, request: HttpRequest, token: str):
        found = api_token_check(token.strip())
        if found.read_only and request.method not in SAFE_METHODS:
            raise PermissionDenied("This API token is read-only.")
        request.api_token = found
        return found.user


token_auth = ApiTokenAuth()
