"""What JSON from outside (a provider's chunk, an API request's body) may carry that no store
keeps: NUL characters, lone UTF-16 halves, and numbers that are not numbers.

A NUL (`\\u0000`) is valid JSON text, but PostgreSQL refuses it in a text column (the reply's
save failed, and its turn with it) and SQLite's substr() ends a string at it (a draft
appended after it lost what lay between). A surrogate escape without its other half
(`\\ud83d`, an emoji cut in two by a gateway that counts UTF-16 units, as JavaScript does) is
refused by orjson, which failed the whole turn. Both become U+FFFD, the replacement
character, and the rest of the reply streams and is stored as sent. `NaN`, `Infinity` (or
a number too big for a float, `1e999`) are no JSON, but the standard library reads them:
stored in a message's usage or extra they failed the JSON column's check (SQLite) or
PostgreSQL's jsonb, and the reply with them; they become null.

A chunk's NULs are replaced in the strings the accumulator keeps (a one-character search
of each, cheaper per chunk than a search of every chunk's bytes for the escape), and in the
rest of a response as it finishes (`nul_free`); an API body's in its bytes, before it is
parsed.
"""

import json
import math
import re
from typing import Any

# A \u0000 escape: after an even number of backslashes (an odd one escapes the backslash, and
# the text is the six characters "\u0000", as a tool call's arguments carry theirs).
_NUL_ESCAPE = re.compile(rb"(?<!\\)((?:\\\\)*)\\u0000")


def nul_replaced(text: str) -> str:
    """The text with each NUL replaced by U+FFFD."""
    return text.replace("\x00", "\ufffd")


def nul_free(value: Any) -> Any:
    """The JSON value with each NUL in its strings, keys included, replaced by U+FFFD: for
    what a chunk carries besides its text (a call's id, name and extra keys, a delta's
    unknown keys), kept in JSON columns, where PostgreSQL's jsonb refuses a NUL."""
    if isinstance(value, str):
        return nul_replaced(value)
    if isinstance(value, dict):
        return {nul_free(key): nul_free(item) for key, item in value.items()}
    if isinstance(value, list):
        return [nul_free(item) for item in value]
    return value


def nul_escapes_replaced(payload: bytes) -> bytes:
    """The JSON text with each NUL it encodes encoding U+FFFD instead."""
    return _NUL_ESCAPE.sub(rb"\1\\ufffd", payload)


def lenient_loads(payload: bytes) -> Any:
    """JSON that orjson refused, parsed by the standard library, which lets a lone surrogate
    through; each then becomes U+FFFD (a pair split inside one string is joined), and each
    number that is not finite None. Raises ValueError for text that is not JSON at all."""
    value = json.loads(payload, parse_constant=_not_a_number, parse_float=_finite)
    return _surrogates_replaced(value)


def _not_a_number(_constant: str) -> None:
    return None


def _finite(text: str) -> float | None:
    number = float(text)
    return number if math.isfinite(number) else None


def _surrogates_replaced(value: Any) -> Any:
    if isinstance(value, str):
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if isinstance(value, dict):
        return {_surrogates_replaced(k): _surrogates_replaced(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_surrogates_replaced(item) for item in value]
    return value
