"""Where a rojo's API key may come from, and when a stored key must go.

Whoever may change a rojo chooses both the variable its key is read from and the URL the key
is sent to. Left open, that pair sends any variable of the process (SECRET_KEY, DATABASE_URL,
the OIDC client secret) to any host. So a key variable must be named as one, and a key stored
for one endpoint is never sent to another. The admin, `create_rojo`, `demo`, the start-up check
and the key's resolution before each request all ask this module, so the rule has one home.
"""

import os
from urllib.parse import urlsplit

from django.conf import settings

from rojos.errors import RojoKeyRefused

KEY_ENV_DOCUMENTED = "ROJO_API_KEY"
KEY_ENV_PREFIX = "ROJO_KEY_"
KEY_ENV_RULE = (
    f"a rojo's key variable must be {KEY_ENV_DOCUMENTED}, start with {KEY_ENV_PREFIX}, "
    "or be listed in ROJO_API_KEY_ENV_ALLOWED"
)
_DEFAULT_PORTS = {"http": 80, "https": 443}


def key_env_allowed(name: str) -> bool:
    """Whether a rojo may read its key from the environment variable `name` ('' reads none)."""
    if not name or name == KEY_ENV_DOCUMENTED:
        return True
    if name.startswith(KEY_ENV_PREFIX) and len(name) > len(KEY_ENV_PREFIX):
        return True
    return name in _allow_list()


def key_env_refusal(name: str) -> str | None:
    """Why `name` may not hold a rojo's key (the rule, in words), or None when it may."""
    if key_env_allowed(name):
        return None
    return f"{name!r} is not a key variable: {KEY_ENV_RULE}."


def key_env_value(name: str) -> str:
    """The key held in the variable `name`; raises RojoKeyRefused, before anything is sent,
    for a variable the rule refuses (a rojo saved before the rule, or edited in the database)."""
    refusal = key_env_refusal(name)
    if refusal:
        raise RojoKeyRefused(
            f"This rojo cannot be used: its API key env {refusal} "
            "An admin must change the rojo's API key env."
        )
    return os.environ.get(name, "") if name else ""


def endpoint_moved(before: str, after: str) -> bool:
    """Whether two base URLs differ in scheme, host or port: a stored key does not follow.

    A path change (another API version on the same server) keeps it; a URL that does not
    parse counts as moved.
    """
    try:
        return _endpoint(before) != _endpoint(after)
    except ValueError:
        return True


def _endpoint(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    return scheme, (parts.hostname or "").lower(), parts.port or _DEFAULT_PORTS.get(scheme)


def _allow_list() -> set[str]:
    """ROJO_API_KEY_ENV_ALLOWED, read at call time: a list, or one comma-separated string."""
    allowed = getattr(settings, "ROJO_API_KEY_ENV_ALLOWED", ())
    if isinstance(allowed, str):
        allowed = allowed.split(",")
    return {name.strip() for name in allowed if name.strip()}
