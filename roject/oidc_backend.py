"""The authentication backend of single sign-on: mozilla-django-oidc's, with users matched
by a verified email, named after preferred_username, and given project roles by group.

Account takeover: whoever controls an email address at the provider would log in as the
app's user with that address. An address the provider marks `email_verified: false` is
refused outright (no match, no new account); a provider that sends no email_verified
(Entra ID) is trusted to hand out only addresses it owns — see README, "Single sign-on".
"""

import logging

import requests
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import SuspiciousOperation
from django.db import IntegrityError, transaction
from mozilla_django_oidc.auth import OIDCAuthenticationBackend

from .login_limits import client_ip
from .oidc import OidcUnavailable, oidc_discovery, oidc_enabled, oidc_setting
from .oidc_roles import membership_sync_from_groups

logger = logging.getLogger(__name__)

_USERNAME_LENGTH = 150


class OidcBackend(OIDCAuthenticationBackend):
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
        try:
            return super().get_or_create_user(access_token, id_token, payload)
        except SuspiciousOperation as exc:  # the parent logs it and returns no user
            self._refused(str(exc))
            raise

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

    def verify_token(self, token, **kwargs):
        """The parent checks the signature and nonce; the issuer and audience are checked
        here, so a token the provider made for another client or issuer is refused."""
        payload = super().verify_token(token, **kwargs)
        audience = payload.get("aud")
        audiences = audience if isinstance(audience, list) else [audience]
        if self.OIDC_RP_CLIENT_ID not in audiences:
            raise SuspiciousOperation("The ID token is not for this client.")
        if payload.get("iss") != oidc_discovery().get("issuer"):
            raise SuspiciousOperation("The ID token's issuer is not the configured provider.")
        return payload

    def get_userinfo(self, access_token, id_token, payload):
        """The ID token's claims with the userinfo endpoint's over them: a groups claim may
        come in either (Entra ID puts it in the ID token only)."""
        userinfo = super().get_userinfo(access_token, id_token, payload)
        if userinfo.get("sub") != payload.get("sub"):  # OIDC Core 5.3.2: else a substitution
            raise SuspiciousOperation("The userinfo is not the ID token's user's.")
        return {**payload, **userinfo}

    def verify_claims(self, claims) -> bool:
        email = claims.get("email")
        if not isinstance(email, str) or "@" not in email:
            raise SuspiciousOperation("The provider sent no email address.")
        if claims.get("email_verified") is False:
            raise SuspiciousOperation("The provider has not verified the email address.")
        return True

    def filter_users_by_claims(self, claims):
        return self.UserModel.objects.filter(email__iexact=claims["email"])

    def create_user(self, claims):
        for _ in range(3):
            try:
                with transaction.atomic():
                    user = self.UserModel(username=_free_username(claims), email=claims["email"])
                    user.set_unusable_password()
                    _copy_names(user, claims)
                    user.save()
                    self._sync_roles(user, claims)
                return user
            except IntegrityError:  # another sign-in took the name since it was found free
                continue
        raise SuspiciousOperation("No free username was found for the new account.")

    def update_user(self, user, claims):
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


def _free_username(claims) -> str:
    """preferred_username when no account has it, else it with -2, -3, … appended; the
    email's local part when the provider sends no preferred_username."""
    User = get_user_model()
    wanted = claims.get("preferred_username")
    if not isinstance(wanted, str) or not wanted.strip():
        wanted = claims["email"].partition("@")[0]
    base = wanted.strip()[: _USERNAME_LENGTH - 8] or "user"
    candidate, number = base, 1
    while User.objects.filter(username__iexact=candidate).exists():
        number += 1
        candidate = f"{base}-{number}"
    return candidate
