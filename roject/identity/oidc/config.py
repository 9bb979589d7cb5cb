"""Single sign-on with an OpenID Connect provider: its configuration, read from the
ROJO_OIDC_* settings and the provider's discovery document.

mozilla-django-oidc does the protocol (roject/oidc_backend.py, roject/identity/oidc/views.py); it
reads its OIDC_* settings through `oidc_setting`, which takes the endpoints from the
discovery document (fetched when first needed, kept ROJO_OIDC_DISCOVERY_SECONDS), so only
the discovery URL, the client and the scopes are configured.
"""

import threading
import time
from urllib.parse import urlencode, urlsplit

import requests
from django.conf import settings
from django.urls import reverse

_TIMEOUT = 10
_lock = threading.Lock()
_cache: dict[str, tuple[float, dict]] = {}

# mozilla-django-oidc's settings, and the discovery document's fields that answer them.
_FROM_DISCOVERY = {
    "OIDC_OP_AUTHORIZATION_ENDPOINT": "authorization_endpoint",
    "OIDC_OP_TOKEN_ENDPOINT": "token_endpoint",
    "OIDC_OP_USER_ENDPOINT": "userinfo_endpoint",
    "OIDC_OP_JWKS_ENDPOINT": "jwks_uri",
}
# mozilla-django-oidc checks RS*/ES* with the provider's keys, the others with the secret.
_SIGN_ALGORITHMS = ("RS256", "ES256", "RS384", "RS512", "ES384", "ES512", "HS256")
_FIXED = {
    "OIDC_USE_PKCE": True,
    "OIDC_USE_NONCE": True,
    # Kept in the session for the provider's logout (its id_token_hint), never shown.
    "OIDC_STORE_ID_TOKEN": True,
    "OIDC_STORE_ACCESS_TOKEN": False,
    "OIDC_CREATE_USER": True,
    "OIDC_TIMEOUT": _TIMEOUT,
    "OIDC_AUTHENTICATION_CALLBACK_URL": "oidc_authentication_callback",
    "OIDC_REDIRECT_FIELD_NAME": "next",
}


class OidcUnavailable(Exception):
    """The provider's discovery document cannot be fetched or lacks an endpoint."""


def oidc_discovery_url() -> str:
    """ROJO_OIDC_DISCOVERY_URL, else the issuer's well-known document; "" when neither is set."""
    if settings.ROJO_OIDC_DISCOVERY_URL:
        return settings.ROJO_OIDC_DISCOVERY_URL
    issuer = settings.ROJO_OIDC_ISSUER.rstrip("/")
    return f"{issuer}/.well-known/openid-configuration" if issuer else ""


def oidc_enabled() -> bool:
    """Whether single sign-on is configured (a discovery URL or issuer, and a client id)."""
    return bool(oidc_discovery_url() and settings.ROJO_OIDC_CLIENT_ID)


def oidc_discovery() -> dict:
    """The provider's discovery document, fetched at most once per ROJO_OIDC_DISCOVERY_SECONDS."""
    url = oidc_discovery_url()
    with _lock:
        fetched, document = _cache.get(url, (0.0, {}))
        if document and time.monotonic() - fetched < settings.ROJO_OIDC_DISCOVERY_SECONDS:
            return document
    try:
        response = requests.get(url, timeout=_TIMEOUT)
        response.raise_for_status()
        document = response.json()
    except (requests.RequestException, ValueError) as exc:
        raise OidcUnavailable(f"The sign-in provider's discovery document failed: {exc}") from exc
    if not isinstance(document, dict) or not all(
        isinstance(document.get(field), str) for field in _FROM_DISCOVERY.values()
    ):
        raise OidcUnavailable("The sign-in provider's discovery document lacks an endpoint.")
    with _lock:
        _cache[url] = (time.monotonic(), document)
    return document


def oidc_discovery_forget() -> None:
    """Drop the kept discovery documents (tests start providers on new ports)."""
    with _lock:
        _cache.clear()


def oidc_setting(attr: str, *default):
    """mozilla-django-oidc's setting `attr`, from the ROJO_OIDC_* settings and discovery."""
    if attr in _FROM_DISCOVERY:
        return oidc_discovery()[_FROM_DISCOVERY[attr]]
    if attr == "OIDC_RP_SIGN_ALGO":
        return _sign_algorithm(oidc_discovery())
    values = {
        **_FIXED,
        "OIDC_RP_CLIENT_ID": settings.ROJO_OIDC_CLIENT_ID,
        "OIDC_RP_CLIENT_SECRET": settings.ROJO_OIDC_CLIENT_SECRET,
        "OIDC_RP_SCOPES": settings.ROJO_OIDC_SCOPES,
        "LOGIN_REDIRECT_URL": settings.LOGIN_REDIRECT_URL,
        "LOGIN_REDIRECT_URL_FAILURE": settings.LOGIN_URL,
    }
    if attr in values:
        return values[attr]
    if default:
        return getattr(settings, attr, default[0])
    return getattr(settings, attr)


def _sign_algorithm(document: dict) -> str:
    """The ID tokens' signature algorithm: the first the provider lists of those checked
    here, asymmetric first; never `none`, whatever the document says."""
    offered = document.get("id_token_signing_alg_values_supported") or ["RS256"]
    for algorithm in _SIGN_ALGORITHMS:
        if algorithm in offered:
            return algorithm
    raise OidcUnavailable(f"The sign-in provider signs ID tokens with none of {_SIGN_ALGORITHMS}.")


def oidc_logout_url(request, *, id_token: str | None) -> str | None:
    """Where to send the browser to end its session at the provider too (RP-initiated
    logout), or None when the provider has no end_session_endpoint or cannot be reached."""
    try:
        endpoint = oidc_discovery().get("end_session_endpoint")
    except OidcUnavailable:
        return None
    if not isinstance(endpoint, str) or not endpoint:
        return None
    params = {
        "client_id": settings.ROJO_OIDC_CLIENT_ID,
        "post_logout_redirect_uri": request.build_absolute_uri(
            reverse(settings.LOGOUT_REDIRECT_URL)
        ),
    }
    if id_token:
        params["id_token_hint"] = id_token
    joiner = "&" if urlsplit(endpoint).query else "?"
    return f"{endpoint}{joiner}{urlencode(params)}"


def oidc_form_origins() -> list[str]:
    """The provider's origins a form of this site may end at: the logout form is answered
    with a redirect to the provider, and Chromium applies CSP form-action to redirects."""
    if not oidc_enabled():
        return []
    urls = [oidc_discovery_url()]
    with _lock:
        document = _cache.get(urls[0], (0.0, {}))[1]
    if isinstance(document.get("end_session_endpoint"), str):
        urls.append(document["end_session_endpoint"])
    origins = []
    for url in urls:
        parts = urlsplit(url)
        origin = f"{parts.scheme}://{parts.netloc}"
        if parts.scheme in {"http", "https"} and parts.netloc and origin not in origins:
            origins.append(origin)
    return origins
