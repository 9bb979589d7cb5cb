"""Which app account a provider's sign-in is: bound by (issuer, sub), an email only once.

An email address is no proof of who owns an account here: owners type addresses freely
(invitations) and an admin may give any account any address. So a sign-in is found by
the provider's (issuer, subject), stored at its first login (OidcIdentity). A first login
is matched by email only to a unique account that could not have been prepared by someone
else: the provider has verified the address, the account has no usable password and is
neither staff nor superuser, and no other subject of this issuer is bound to it. Any
other account with that address refuses the sign-in (an administrator links or fixes it);
no address at all on this site makes a new account.
"""

import unicodedata

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.validators import UnicodeUsernameValidator
from django.core.exceptions import SuspiciousOperation, ValidationError

from roject.models import OidcIdentity

_USERNAME_LENGTH = 150
_TAKEN = (
    "An account with this email address exists here but cannot be joined to single "
    "sign-on by itself (it has a password, is staff, or is another sign-in's): ask an "
    "administrator."
)


def email_verified(claims) -> bool:
    """Only True or "true" verify; a missing claim only with ROJO_OIDC_EMAIL_VERIFIED_DEFAULT
    (Entra ID sends none)."""
    value = claims.get("email_verified")
    if value is None:
        return bool(settings.ROJO_OIDC_EMAIL_VERIFIED_DEFAULT)
    return value is True or (isinstance(value, str) and value.strip().lower() == "true")


def oidc_identity_user(*, issuer: str, subject: str):
    """(Blocking) The account bound to (issuer, subject), or None at its first sign-in."""
    identity = (
        OidcIdentity.objects.select_related("user").filter(issuer=issuer, subject=subject).first()
    )
    return identity.user if identity else None


def _joinable(user, issuer: str) -> bool:
    return (
        not user.has_usable_password()
        and not user.is_staff
        and not user.is_superuser
        and not OidcIdentity.objects.filter(user=user, issuer=issuer).exists()
    )


def oidc_email_user(*, issuer: str, claims):
    """(Blocking) At a first sign-in, the one account the verified email may join, or None
    when no account has the address; SuspiciousOperation when one has it but may not be
    joined, or several have it."""
    if not email_verified(claims):
        raise SuspiciousOperation("The provider has not verified the email address.")
    users = list(get_user_model().objects.filter(email__iexact=claims["email"])[:2])
    if len(users) > 1:
        raise SuspiciousOperation(
            "Several accounts here have this email address: ask an administrator."
        )
    if users and not _joinable(users[0], issuer):
        raise SuspiciousOperation(_TAKEN)
    return users[0] if users else None


def oidc_identity_bind(*, user, issuer: str, subject: str) -> None:
    """(Blocking) Remember that (issuer, subject) signs in as `user` from now on."""
    OidcIdentity.objects.create(user=user, issuer=issuer, subject=subject)


def _username_base(claims) -> str:
    """A username from preferred_username (its local part if it is an address), else the
    email's local part: NFKC, no '@', only what Django's validator allows, no leading
    '=', '+' or '-' (a spreadsheet formula when exported)."""
    for wanted in (claims.get("preferred_username"), claims["email"]):
        if not isinstance(wanted, str):
            continue
        wanted = unicodedata.normalize("NFKC", wanted).partition("@")[0]
        kept = "".join(c for c in wanted if c.isalnum() or c in "._-+")
        kept = kept.lstrip("=+-")[: _USERNAME_LENGTH - 8]
        if kept:
            return kept
    return "user"


def free_username(claims) -> str:
    """The username base when no account has it, else it with -2, -3, … appended."""
    User = get_user_model()
    base = _username_base(claims)
    try:
        UnicodeUsernameValidator()(base)
    except ValidationError:
        base = "user"
    candidate, number = base, 1
    while User.objects.filter(username__iexact=candidate).exists():
        number += 1
        candidate = f"{base}-{number}"
    return candidate
