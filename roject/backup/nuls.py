"""NUL in text, which SQLite keeps and PostgreSQL refuses, in text columns and in JSON alike.

An archive from SQLite may hold text with NUL (0x00) characters, stored before the app made
them U+FFFD on the way in (rojos/provider/wire_text.py). PostgreSQL refuses such a value, and
with it the whole restore; there each NUL becomes U+FFFD, the replacement character, as the
app now does for new text, and the commands say how many values changed in which tables.
"""

from collections import Counter
from typing import Any

from django.db.backends.base.base import BaseDatabaseWrapper

NUL = "\0"
REPLACEMENT = "\ufffd"


def nuls_refused(connection: BaseDatabaseWrapper) -> bool:
    """Whether the database refuses NUL in text and JSON."""
    return connection.vendor == "postgresql"


def holds_nul(value: Any) -> bool:
    """Whether a column's value (text, or a JSON value: its keys and strings) holds a NUL."""
    if isinstance(value, str):
        return NUL in value
    if isinstance(value, dict):
        return any(holds_nul(key) or holds_nul(item) for key, item in value.items())
    if isinstance(value, list):
        return any(holds_nul(item) for item in value)
    return False


def nuls_replaced(value: Any) -> Any:
    """The value with each NUL, in its keys and strings, U+FFFD."""
    if isinstance(value, str):
        return value.replace(NUL, REPLACEMENT)
    if isinstance(value, dict):
        return {nuls_replaced(key): nuls_replaced(item) for key, item in value.items()}
    if isinstance(value, list):
        return [nuls_replaced(item) for item in value]
    return value


def nuls_line(counts: Counter[str], *, done: bool) -> str | None:
    """What a check (`done` False) or a restore says of the values holding a NUL, or None."""
    if not counts:
        return None
    values, tables = counts.total(), len(counts)
    became = "each became U+FFFD" if done else "restored here, each will become U+FFFD"
    each = ", ".join(f"{label}: {count}" for label, count in sorted(counts.items()))
    return (
        f"{values} value{'s' if values != 1 else ''} in {tables} table{'s' if tables != 1 else ''}"
        f" held a NUL (0x00), which PostgreSQL refuses in text: {became} ({each})"
    )
