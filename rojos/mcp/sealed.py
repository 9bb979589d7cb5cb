"""Secrets kept sealed at rest: MCP servers' OAuth tokens and client records, encrypted and
authenticated with Fernet (`cryptography`) under the keys of ROJO_MCP_TOKEN_KEYS.

The first key seals and every key opens (`MultiFernet`), so a key is rotated by listing a
new one first and sealing every row again with it (`manage.py mcp_tokens_reseal`) before
the old one is dropped. Without ROJO_MCP_TOKEN_KEYS the keys are derived from SECRET_KEY
and SECRET_KEY_FALLBACKS, so Django's own rotation applies. Either way a copy of the
database alone (a backup, an export) holds no token in clear.
"""

import logging

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings

from roject.identity.sealing import secret_key_box

__all__ = ["InvalidToken", "opens", "reseal", "seal", "unseal"]

logger = logging.getLogger("rojos.mcp")

_PURPOSE = b"rojo-chat mcp oauth tokens"


def _keys() -> MultiFernet:
    if not settings.ROJO_MCP_TOKEN_KEYS:
        return secret_key_box(_PURPOSE)
    return MultiFernet([Fernet(key.encode()) for key in settings.ROJO_MCP_TOKEN_KEYS])


def seal(data: bytes) -> bytes:
    """`data` encrypted and authenticated under the first key."""
    return _keys().encrypt(data)


def unseal(sealed: bytes) -> bytes | None:
    """What `seal` sealed, or None when no key opens it (a key dropped too soon): the
    person then signs in again, and the log says why."""
    try:
        return _keys().decrypt(bytes(sealed))
    except InvalidToken:
        logger.warning("an MCP account's sealed tokens open with none of ROJO_MCP_TOKEN_KEYS")
        return None


def opens(sealed: bytes) -> bool:
    """Whether a key of this installation opens `sealed` (nothing logged: a check)."""
    try:
        _keys().decrypt(bytes(sealed))
    except InvalidToken:
        return False
    return True


def reseal(sealed: bytes) -> bytes:
    """The same secret sealed under the first key (raises InvalidToken if no key opens it)."""
    return _keys().rotate(bytes(sealed))
