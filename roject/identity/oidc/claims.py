"""The ID token's checks that mozilla-django-oidc leaves out (it checks the signature and
the nonce only): issuer, audience, authorized party, expiry and issue time.

Each failure is a SuspiciousOperation, which the backend turns into a failed login.
"""

import time

from django.core.exceptions import SuspiciousOperation

# Clocks differ a little between the provider and this server.
SKEW_SECONDS = 120


def _issuer_check(payload, *, issuer, configured: str) -> None:
    """Both the token's iss and the discovery document's issuer set and equal (None == None
    is no match), and equal to ROJO_OIDC_ISSUER when that is set."""
    token_issuer = payload.get("iss")
    if not isinstance(token_issuer, str) or not token_issuer or not issuer:
        raise SuspiciousOperation("The ID token or the provider names no issuer.")
    wanted = configured.rstrip("/")
    if token_issuer != issuer or (wanted and token_issuer.rstrip("/") != wanted):
        raise SuspiciousOperation("The ID token's issuer is not the configured provider.")


def _audience_check(payload, *, client_id: str) -> None:
    audience = payload.get("aud")
    audiences = audience if isinstance(audience, list) else [audience]
    if client_id not in audiences:
        raise SuspiciousOperation("The ID token is not for this client.")
    azp = payload.get("azp")
    if (len(audiences) > 1 or azp is not None) and azp != client_id:  # OIDC Core 3.1.3.7
        raise SuspiciousOperation("The ID token was issued to another party.")


def _time_check(payload, *, now: float) -> None:
    expires, issued = payload.get("exp"), payload.get("iat")
    if not isinstance(expires, (int, float)) or isinstance(expires, bool):
        raise SuspiciousOperation("The ID token has no expiry.")
    if expires + SKEW_SECONDS < now:
        raise SuspiciousOperation("The ID token has expired.")
    if isinstance(issued, (int, float)) and issued - SKEW_SECONDS > now:
        raise SuspiciousOperation("The ID token was issued in the future.")


def token_check(payload, *, client_id: str, issuer, configured: str, now: float | None = None):
    """Refuse an ID token for another issuer or client, or outside its lifetime."""
    _issuer_check(payload, issuer=issuer, configured=configured)
    _audience_check(payload, client_id=client_id)
    _time_check(payload, now=time.time() if now is None else now)
