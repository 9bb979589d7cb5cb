"""Removing a secret from a message before anyone sees, stores or logs it.

A provider, or an MCP server in front of one, may quote the key it was given in its error:
whole, or masked as "sk-proj-****abcd". Such a message reaches the user, the stored history
and, as a tool's error, the model's provider: another host than the one the key was meant for.
"""

import re

# What a key starts with to say whose and what kind it is ("sk-", "sk-proj-", "sk-ant-api03-",
# "gsk_"): lowercase words of up to five letters and digits, each ended by - or _. Published by
# the provider, the same for every key of its kind, so showing it gives nothing away.
_KEY_KIND = re.compile(r"(?:[a-z0-9]{1,5}[-_])*")
# The shortest run of a key's own characters that a message may not show: a masked form
# such as "sk-proj-****abcd" shows four.
_SHORTEST_SECRET = 4


def scrub(text: str, secret: str | None) -> str:
    """Remove an API key from a message before anyone sees, stores or logs it: the whole key,
    and any run of 4 or more of its characters past its kind prefix (a provider that echoes
    a prefix, a suffix, or the key less a few characters), each becomes "***"."""
    if not secret or len(secret) < _SHORTEST_SECRET:
        return text
    text = text.replace(secret, "***")
    secret_part = secret[_KEY_KIND.match(secret).end() :]
    if len(secret_part) < _SHORTEST_SECRET:
        secret_part = secret
    return "".join(_unkeyed(text, secret_part))


def _unkeyed(text: str, secret: str):
    """The pieces of `text`, with each longest run that is a substring of `secret` (and is
    4 characters or more) replaced by "***"; one set lookup per character of `text`."""
    n = _SHORTEST_SECRET
    grams = {secret[i : i + n] for i in range(len(secret) - n + 1)}
    start = i = 0
    while i <= len(text) - n:
        if text[i : i + n] not in grams:
            i += 1
            continue
        end = i + n
        while end < len(text) and text[i : end + 1] in secret:
            end += 1
        yield text[start:i]
        yield "***"
        start = i = end
    yield text[start:]
