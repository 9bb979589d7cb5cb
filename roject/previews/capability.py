"""The capability in a preview's address: a person's read of one project, signed, for
`ROJO_PREVIEW_SECONDS`, as good as the sign-in that asked for it, from where it was asked.

A sandboxed page has an origin of its own, so its requests for the pictures and styles beside
it carry no session cookie; the address carries this instead. It grants nothing the person
could not read anyway, and each request checks their access again (`views.preview`), and the
sign-in it came with: the API token, or the login session still signed in (a logout ends the
addresses asked in that session, and no other's), and the password as it was (a change of
password ends the person's other sessions, and so their addresses too). The session's key
travels sealed (roject.identity.sealing): the address is signed, not secret, and must not show
what a session cookie holds. Like a session, it outlives a rotation of SECRET_KEY while the old
key is in SECRET_KEY_FALLBACKS; one asked in a session ends, though, at that session's next
request, where Django gives the session a new key (its password hash matched a fallback key
only): the file panel asks for a new address as the file is opened again.

It is bound to the client's address too (as the login limits count it: an IPv6 client's
/64). A page the rojo or an editor wrote can undo the preview's `Referrer-Policy` (a
`<meta name="referrer" content="unsafe-url">`), so a click on its link hands the address to
another site; from there it reads nothing.
"""

import hashlib
from dataclasses import dataclass, field
from itertools import chain

from cryptography.fernet import InvalidToken
from django.conf import settings
from django.core import signing
from django.utils.crypto import constant_time_compare, salted_hmac

from roject.identity.sealing import secret_key_box

_SALT = "rojo.preview"
_SESSION_PURPOSE = b"rojo-chat preview session"


@dataclass(frozen=True, slots=True)
class PreviewGrant:
    """What an address stands for: whose read of which project, asked with which token or in
    which login session."""

    user_id: int
    project_id: int
    token_id: int | None
    password_mark: str
    address_mark: str
    session_key: str | None = field(repr=False)  # what the session cookie holds: never shown

    def password_unchanged(self, user) -> bool:
        """Whether the user's password is the one the address was made under: Django's
        session check (`django.contrib.auth.get_user`), its fallback keys too."""
        hashes = chain([user.get_session_auth_hash()], user.get_session_auth_fallback_hash())
        return any(constant_time_compare(self.password_mark, _password_mark(h)) for h in hashes)

    def asked_from(self, address: str) -> bool:
        """Whether `address` is the client address the address was asked from."""
        secrets = [settings.SECRET_KEY, *settings.SECRET_KEY_FALLBACKS]
        marks = (_address_mark(address, secret) for secret in secrets)
        return any(constant_time_compare(self.address_mark, mark) for mark in marks)


def _password_mark(session_auth_hash: str) -> str:
    """A digest of the user's session auth hash (Django's, keyed by SECRET_KEY, of the
    password hash), of no use elsewhere: a new password, a new mark."""
    return hashlib.sha256(f"{_SALT}:{session_auth_hash}".encode()).hexdigest()[:24]


def _address_mark(address: str, secret: str | None = None) -> str:
    """A digest of the client's address: the capability's text is signed, not secret."""
    mark = salted_hmac(_SALT + ".address", address, secret=secret, algorithm="sha256")
    return mark.hexdigest()[:24]


def preview_capability(
    *,
    user,
    project_id: int,
    address: str,
    token_id: int | None = None,
    session_key: str | None = None,
) -> str:
    """The capability of `user` asking from the client `address`, with the API token
    `token_id` or in the login session `session_key` (either, or neither)."""
    password = _password_mark(user.get_session_auth_hash())
    sealed = None
    if session_key:
        sealed = secret_key_box(_SESSION_PURPOSE).encrypt(session_key.encode()).decode()
    grant = [user.pk, project_id, token_id, password, _address_mark(address), sealed]
    return signing.dumps(grant, salt=_SALT, compress=False)


def preview_capability_read(token: str) -> PreviewGrant | None:
    """What the capability grants, or None for one forged, altered or expired, or whose
    session no key of this installation opens."""
    try:
        user_id, project_id, token_id, mark, address, sealed = signing.loads(
            token, salt=_SALT, max_age=settings.ROJO_PREVIEW_SECONDS
        )
        session_key = None
        if sealed is not None:
            session_key = secret_key_box(_SESSION_PURPOSE).decrypt(str(sealed).encode()).decode()
        return PreviewGrant(
            int(user_id),
            int(project_id),
            None if token_id is None else int(token_id),
            str(mark),
            str(address),
            session_key,
        )
    except (signing.BadSignature, InvalidToken, ValueError, TypeError):
        return None
