"""The ID token checks mozilla-django-oidc leaves out (roject/identity/oidc/claims.py), each with a
token that must be refused, and the backend's refusal of HMAC without a client secret."""

import pytest
from django.core.exceptions import SuspiciousOperation
from django.test import RequestFactory

from roject.identity.oidc.claims import SKEW_SECONDS, token_check
from roject.oidc_backend import OidcBackend

NOW = 1_800_000_000
ISSUER = "https://id.example.com"
GOOD = {"iss": ISSUER, "aud": "app", "exp": NOW + 300, "iat": NOW - 5, "sub": "1"}


def _check(payload, *, issuer=ISSUER, configured=""):
    token_check(payload, client_id="app", issuer=issuer, configured=configured, now=NOW)


def test_a_good_token_passes():
    _check(GOOD)
    _check({**GOOD, "aud": ["app", "other"], "azp": "app"})
    _check(GOOD, configured=ISSUER + "/")


@pytest.mark.parametrize(
    ("changes", "issuer", "configured", "message"),
    [
        ({"iss": None}, None, "", "names no issuer"),  # None == None is no match
        ({}, None, "", "names no issuer"),
        ({"iss": "https://evil.example.com"}, ISSUER, "", "issuer is not"),
        ({}, ISSUER, "https://other.example.com", "issuer is not"),
        ({"aud": "other"}, ISSUER, "", "not for this client"),
        ({"aud": ["app", "other"]}, ISSUER, "", "another party"),
        ({"aud": ["app", "other"], "azp": "other"}, ISSUER, "", "another party"),
        ({"exp": NOW - SKEW_SECONDS - 1}, ISSUER, "", "expired"),
        ({"exp": None}, ISSUER, "", "no expiry"),
        ({"exp": True}, ISSUER, "", "no expiry"),
        ({"iat": NOW + SKEW_SECONDS + 60}, ISSUER, "", "in the future"),
    ],
)
def test_a_bad_token_is_refused(changes, issuer, configured, message):
    payload = {key: value for key, value in {**GOOD, **changes}.items() if value is not None}
    with pytest.raises(SuspiciousOperation, match=message):
        _check(payload, issuer=issuer, configured=configured)


def test_hmac_signed_tokens_need_a_client_secret(db, settings, monkeypatch):
    """With no secret, HS256 would verify tokens signed with the empty key: refused."""
    from roject import oidc_backend

    settings.ROJO_OIDC_ISSUER = ISSUER
    settings.ROJO_OIDC_CLIENT_ID = "app"
    settings.ROJO_OIDC_CLIENT_SECRET = ""
    answers = {"OIDC_RP_SIGN_ALGO": "HS256", "OIDC_RP_CLIENT_SECRET": ""}
    monkeypatch.setattr(oidc_backend, "oidc_setting", lambda name: answers.get(name, "x"))
    request = RequestFactory().get("/oidc/callback/")
    assert OidcBackend().authenticate(request, nonce="n", code="c", code_verifier="v") is None
    assert request.oidc_failure == "An HMAC-signed ID token needs a client secret."
