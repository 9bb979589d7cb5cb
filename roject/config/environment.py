"""Environment variables as settings' values: yes/no, lists, numbers; one that is not what
its name needs stops the start, naming it."""

import math
import os
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured


def env_bool(name: str, default: bool) -> bool:
    """Read a yes/no environment variable (1/0, true/false, yes/no, on/off)."""
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_list(name: str, default: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


def env_int(name: str, default: int, *, positive: bool = False) -> int:
    return _env_number(name, default, int, positive=positive)


def env_float(name: str, default: float, *, positive: bool = False) -> float:
    return _env_number(name, default, float, positive=positive)


def _env_number(name: str, default, kind, *, positive: bool):
    """A number from the environment; one that is not, or is out of range, stops the start
    with its name. Every one is a count, a size or a duration: none is negative, and those
    that pace a loop or bound a wait that must happen (`positive`) are not 0 either (a live
    stream checked every 0 s spun a core and queried the database without pause)."""
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    what = "a whole number" if kind is int else "a number"
    try:
        number = kind(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name}: {value!r} is not {what}.") from None
    if not math.isfinite(number):
        raise ImproperlyConfigured(f"{name}: {value!r} is not {what}.")
    if number < 0 or (positive and number == 0):
        bound = "more than 0" if positive else "0 or more"
        raise ImproperlyConfigured(f"{name}: {value!r} must be {bound}.")
    return number


def secret_key(*, debug: bool) -> str:
    """SECRET_KEY, or the key kept in the file SECRET_KEY_FILE names; a throw-away key only
    with DEBUG."""
    key = os.environ.get("SECRET_KEY", "")
    if not key and os.environ.get("SECRET_KEY_FILE"):
        # The key kept in a file (a container secret, or the one the image keeps in its
        # volume): every process of the install reads the same, `manage.py` in `podman exec`
        # included.
        try:
            key = Path(os.environ["SECRET_KEY_FILE"]).read_text().strip()
        except OSError as exc:
            raise ImproperlyConfigured(
                f"SECRET_KEY_FILE: cannot read {os.environ['SECRET_KEY_FILE']!r} "
                f"({exc.strerror}). Point it at the file that holds the key, or set SECRET_KEY."
            ) from None
    if not key:
        if not debug:
            raise ImproperlyConfigured(
                "SECRET_KEY is not set. Set SECRET_KEY to a long random string for production, "
                "or set DEBUG=1 to run a local development server with a throw-away key."
            )
        key = "django-insecure-development-only-key-do-not-deploy"
    return key
