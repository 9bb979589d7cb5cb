"""Personal API tokens: making one (shown once), checking one on every request, revoking.

A token is `rojo_` and 40 random letters and digits (238 bits), so a SHA-256 digest of it
is all that needs storing: it cannot be guessed back, and looking a token up by its digest
compares no secret character by character. The prefix makes a leaked token recognisable
to secret scanners and to its owner.
"""

import hashlib
import secrets
import string
from dataclasses import dataclass
from datetime import timedelta

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from roject.audit.log import AuditAction, AuditActor, audit_record
from roject.errors import AppError
from roject.models import ApiToken

TOKEN_PREFIX = "rojo_"
_ALPHABET = string.ascii_letters + string.digits
_RANDOM_LENGTH = 40
_SHOWN_LENGTH = len(TOKEN_PREFIX) + 6
# last_used is written at most this often per token, not on every request.
_LAST_USED_EVERY = timedelta(seconds=60)


class TokenRefused(AppError):
    """A bearer token that is unknown, expired or revoked: the web layer answers 401."""


class TokenError(AppError):
    """A token that cannot be made as asked (an empty name, a bad expiry)."""


@dataclass(frozen=True, slots=True)
class NewToken:
    """A token just made: `secret` is the token itself, shown this once and never again."""

    token: ApiToken
    secret: str


def token_digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def api_token_create(
    *,
    user,
    name: str,
    read_only: bool = False,
    expires_days: int | None = None,
    actor: AuditActor | None = None,
) -> NewToken:
    """Make a token for `user`; its secret is in the result only. Audited, by `actor`
    (default: `user`); the entry names the token's prefix, never its secret."""
    name = " ".join(name.split())
    if not name or len(name) > 100:
        raise TokenError("A token needs a name of 1 to 100 characters.")
    if expires_days is not None and not 1 <= expires_days <= 3650:
        raise TokenError("A token expires after 1 to 3650 days, or never.")
    secret = TOKEN_PREFIX + "".join(secrets.choice(_ALPHABET) for _ in range(_RANDOM_LENGTH))
    expires = timezone.now() + timedelta(days=expires_days) if expires_days else None
    with transaction.atomic():
        token = ApiToken.objects.create(
            user=user,
            name=name,
            prefix=secret[:_SHOWN_LENGTH],
            digest=token_digest(secret),
            read_only=read_only,
            expires=expires,
        )
        _audited(AuditAction.TOKEN_CREATED, token, actor or AuditActor(user=user))
    return NewToken(token=token, secret=secret)


def _audited(action: AuditAction, token: ApiToken, actor: AuditActor) -> None:
    """One entry naming the token by name and prefix (never the token itself)."""
    audit_record(
        action=action,
        actor=actor,
        obj=token,
        details={
            "name": token.name,
            "prefix": token.prefix,
            "user": token.user.get_username(),
            "read_only": token.read_only,
        },
    )


def _usable(now):
    return Q(revoked__isnull=True) & (Q(expires__isnull=True) | Q(expires__gt=now))


def api_token_check(secret: str) -> ApiToken:
    """(Blocking) The live token `secret` stands for, with its user; TokenRefused for one
    unknown, expired or revoked, or whose user is inactive. Called on every request and
    every MCP call, so a revocation or an expiry takes effect at once."""
    now = timezone.now()
    if not secret.startswith(TOKEN_PREFIX) or len(secret) > 200:
        raise TokenRefused("The API token is not valid.")
    token = (
        ApiToken.objects.select_related("user")
        .filter(_usable(now), digest=token_digest(secret))
        .first()
    )
    if token is None or not token.user.is_active:
        raise TokenRefused("The API token is not valid, has expired or was revoked.")
    if token.last_used is None or now - token.last_used > _LAST_USED_EVERY:
        ApiToken.objects.filter(pk=token.pk).update(last_used=now)
        token.last_used = now
    return token


def api_token_list(*, user) -> list[ApiToken]:
    """(Blocking) The user's tokens, newest first, revoked ones included."""
    return list(ApiToken.objects.filter(user=user))


def api_token_revoke(*, user, token_id: int, actor: AuditActor | None = None) -> bool:
    """(Blocking) Revoke one of the user's tokens; False when it is not theirs or gone."""
    found = ApiToken.objects.filter(pk=token_id, user=user)
    return bool(api_tokens_revoke(tokens=found, actor=actor or AuditActor(user=user)))


def api_tokens_revoke(*, tokens, actor: AuditActor) -> int:
    """(Blocking) Revoke the live tokens of a queryset, each one audited; how many."""
    revoked = 0
    pks = list(tokens.values_list("pk", flat=True))  # an admin search may make it DISTINCT
    with transaction.atomic():
        locked = ApiToken.objects.filter(pk__in=pks).select_related("user")
        for token in locked.select_for_update(of=("self",)):
            if token.revoked is not None:
                continue
            token.revoked = timezone.now()
            token.save(update_fields=["revoked"])
            _audited(AuditAction.TOKEN_REVOKED, token, actor)
            revoked += 1
    return revoked


async def aapi_token_alive(*, token_id: int) -> bool:
    """Whether the token is still usable (not revoked or expired, its user active)."""
    return await ApiToken.objects.filter(
        _usable(timezone.now()), pk=token_id, user__is_active=True
    ).aexists()


def api_token_live(*, token_id: int) -> ApiToken | None:
    """(Blocking) The token with its user if it is still usable, else None: the check made
    again right before each MCP call runs."""
    token = (
        ApiToken.objects.select_related("user")
        .filter(_usable(timezone.now()), pk=token_id, user__is_active=True)
        .first()
    )
    return token
