"""The `Origin` check of /mcp (MCP's streamable HTTP transport: servers must validate it).

A browser page of another site must not reach the endpoint, even through a name that
resolves to this server. A request with an `Origin` is let through only when it is one of
this site's own origins, by the rule Django's CSRF check applies to the app's forms: the
request's own scheme and host, or one of CSRF_TRUSTED_ORIGINS (exact, or `https://*.example.com`
for its subdomains). A request without one (the SDK, curl, any client that is not a browser)
is not a cross-site request and goes on.
"""

import io
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import DisallowedHost
from django.core.handlers.asgi import ASGIRequest
from django.utils.http import is_same_domain
from starlette.types import Scope

__all__ = ["origin_allowed"]


def _own_origin(scope: Scope) -> str | None:
    """This request's own origin, as Django sees it (SECURE_PROXY_SSL_HEADER included)."""
    request = ASGIRequest(scope, io.BytesIO())
    try:
        return f"{request.scheme}://{request.get_host()}"
    except DisallowedHost:
        return None


def _trusted(origin: str) -> bool:
    trusted = settings.CSRF_TRUSTED_ORIGINS
    if origin in trusted:
        return True
    try:
        parts = urlsplit(origin)
    except ValueError:
        return False
    wildcards = [urlsplit(pattern) for pattern in trusted if "*" in pattern]
    return any(
        allowed.scheme == parts.scheme
        and is_same_domain(parts.netloc, allowed.netloc.partition("*")[2])
        for allowed in wildcards
    )


def origin_allowed(scope: Scope) -> bool:
    """Whether the request has no `Origin`, or one of this site's own."""
    found = [v.decode("latin-1") for k, v in scope["headers"] if k == b"origin"]
    if not found:
        return True
    if len(found) > 1:  # two origins: no browser sends that
        return False
    origin = found[0]
    return origin == _own_origin(scope) or _trusted(origin)
