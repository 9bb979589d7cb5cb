"""Secrets sealed (encrypted and authenticated, Fernet) under keys derived from Django's
SECRET_KEY and SECRET_KEY_FALLBACKS, one key per purpose (HKDF-SHA256).

The first key seals and every key opens, so Django's own rotation of its secret key applies:
what was sealed before a rotation still opens while the old key is a fallback. Used for a
login session's key inside a preview's address (roject.previews), which must name the
session without showing it, and by rojos.mcp.sealed when ROJO_MCP_TOKEN_KEYS is not set.
"""

import base64

from cryptography.fernet import Fernet, MultiFernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings


def _derived_key(secret: str, purpose: bytes) -> bytes:
    """A Fernet key for `purpose` from a Django secret key (HKDF-SHA256)."""
    key = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=purpose).derive(
        secret.encode()
    )
    return base64.urlsafe_b64encode(key)


def secret_key_box(purpose: bytes) -> MultiFernet:
    """The keys for `purpose`: SECRET_KEY's first (it seals), then each fallback's."""
    secrets = [settings.SECRET_KEY, *settings.SECRET_KEY_FALLBACKS]
    return MultiFernet([Fernet(_derived_key(secret, purpose)) for secret in secrets])
