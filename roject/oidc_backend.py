"""The authentication backend of single sign-on: mozilla-django-oidc's, with users found by
the provider's (issuer, sub), named after preferred_username, given project roles by group.

Account takeover: an email address proves nothing here (owners type them into
invitations, an admin sets them), so a sign-in is bound to its account by (iss, sub) at
its first login, and only then may a verified email join an existing account, under the
conditions in roject/identity/oidc/accounts.py — see docs/teams.md, "Single sign-on".
"""

import logging

import requests
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import SuspiciousOperation
from django.db import IntegrityError, transaction
from mozilla_django_oidc.auth import OIDCAuthenticationBackend

from roject.identity.backends import PreparedSessionUser
from roject.identity.login_limits import client_ip
from roject.identity.oidc.accounts import (
    email_verified,
    free_username,
    oidc_email_user,
    oidc_identity_bind,
    oidc_identity_user,
)
from roject.identity.oidc.claims import token_check
from roject.identity.oidc.config import OidcUnavailable, oidc_discovery, oidc_enabled, oidc_setting
from roject.identity.oidc.roles import membership_sync_from_groups

logger = logging.getLogger(__name__)


class OidcBackend(PreparedSessionUser, OIDCAuthenticationBackend):
    """Answers the OIDC callback only (its `nonce`); password logins pass it by."""

    get_settings = staticmethod(oidc_setting)

    def __init__(self, *args, **kwargs):
        # The parent reads every endpoint here; a password login must not fetch discovery.
        self.UserModel = get_user_model()

    def authenticate(self, request, **kwargs):
        if request is None or "nonce" not in kwargs or not oidc_enabled():
            return None
        self.request = request
        try:
            self._configure()
            return super().authenticate(request, **kwargs)
        except SuspiciousOperation as exc:  # the messages are the library's and this module's
            return self._refused(str(exc))
        except (OidcUnavailable, requests.RequestException) as exc:
            logger.warning("OIDC sign-in failed: %s", exc)
            return self._refused(f"provider request failed ({type(exc).__name__})")

    def _refused(self, reason: str) -> None:
        """No user; Django then sends user_login_failed, whose audit entry gives `reason`."""
        self.request.oidc_failure = reason

    def get_or_create_user(self, access_token, id_token, payload):
        """The account bound to the token's (iss, sub); at a first sign-in, the one account
        its verified email may join (roject/identity/oidc/accounts.py) or a new one, bound then."""
        try:
            claims = self.get_userinfo(access_token, id_token, payload)
            issuer, subject = payload["iss"], payload.get("sub")
            if not isinstance(subject, str) or not subject:
                raise SuspiciousOperation("The ID token names no subject.")
            user = oidc_identity_user(issuer=issuer, subject=subject)
            if user is not None:
                return self.update_user(user, claims)
            self.verify_claims(claims)
            with transaction.atomic():
                user = oidc_email_user(issuer=issuer, claims=claims)
                user = self.update_user(user, claims) if user else self.create_user(claims)
                oidc_identity_bind(user=user, issuer=issuer, subject=subject)
            return user
        except SuspiciousOperation as exc:  # the parent logs it and returns no user
            self._refused(str(exc))
            raise
        except IntegrityError:  # the same first sign-in, twice at once
            reason = "The sign-in was bound to an account meanwhile: try again."
            self._refused(reason)
            raise SuspiciousOperation(reason) from None

    def _configure(self) -> None:
        for name in (
            "OIDC_OP_TOKEN_ENDPOINT",
            "OIDC_OP_USER_ENDPOINT",
            "OIDC_OP_JWKS_ENDPOINT",
            "OIDC_RP_CLIENT_ID",
            "OIDC_RP_CLIENT_SECRET",
            "OIDC_RP_SIGN_ALGO",
        ):
            setattr(self, name, oidc_setting(name))
        self.OIDC_RP_IDP_SIGN_KEY = None
        if self.OIDC_RP_SIGN_ALGO.startswith("HS") and not self.OIDC_RP_CLIENT_SECRET:
            raise SuspiciousOperation("An HMAC-signed ID token needs a client secret.")

    def verify_token(self, token, **kwargs):
        """The parent checks the signature and nonce; the issuer, audience, authorized party
        and times are checked here (roject/identity/oidc/claims.py), so a token made for another
        client or issuer, or an expired one, is refused."""
        payload = super().verify_token(token, **kwargs)
        token_check(
            payload,
            client_id=self.OIDC_RP_CLIENT_ID,
            issuer=oidc_discovery().get("issuer"),
            configured=settings.ROJO_OIDC_ISSUER,
        )
        return payload

    def get_userinfo(self, access_token, id_token, payload):
        """The ID token's claims with the userinfo endpoint's over them: a groups claim may
        come in either (Entra ID puts it in the ID token only)."""
        userinfo = super().get_userinfo(access_token, id_token, payload)
        if userinfo.get("sub") != payload.get("sub"):  # OIDC Core 5.3.2: else a substitution
            raise SuspiciousOperation("The userinfo is not the ID token's user's.")
        # The signed ID token's claims win: the userinfo response adds, never overrides.
        return {**userinfo, **payload}

    def verify_claims(self, claims) -> bool:
        email = claims.get("email")
        if not isinstance(email, str) or "@" not in email:
            raise SuspiciousOperation("The provider sent no email address.")
        if not email_verified(claims):
            raise SuspiciousOperation("The provider has not verified the email address.")
        return True

    def create_user(self, claims):
        for _ in range(3):
            try:
                with transaction.atomic():
                    user = self.UserModel(username=free_username(claims), email=claims["email"])
                    user.set_unusable_password()
                    _copy_names(user, claims)
                    user.save()
                    self._sync_roles(user, claims)
                return user
            except IntegrityError:  # another sign-in took the name since it was found free
                continue
        raise SuspiciousOperation("No free username was found for the new account.")

    def update_user(self, user, claims):
        if not user.is_active:  # refused by the callback next: its groups change nothing
            return user
        with transaction.atomic():
            if _copy_names(user, claims):
                user.save(update_fields=["first_name", "last_name"])
            self._sync_roles(user, claims)
        return user

    def _sync_roles(self, user, claims) -> None:
        groups = claims.get(settings.ROJO_OIDC_GROUPS_CLAIM)
        if isinstance(groups, str):
            groups = [groups]
        if not isinstance(groups, list):
            groups = []
        membership_sync_from_groups(
            user=user,
            groups={group for group in groups if isinstance(group, str)},
            address=client_ip(self.request),
        )


def _copy_names(user, claims) -> bool:
    """Take the given and family names from the claims; whether anything changed."""
    changed = False
    for field, claim in (("first_name", "given_name"), ("last_name", "family_name")):
        value = claims.get(claim)
        if isinstance(value, str) and value[:150] != getattr(user, field):
            setattr(user, field, value[:150])
            changed = True
    return changed
