"""How big a regular expression from a model grows when the `regex` engine compiles it.

The engine writes counted repeats of literals out in full: `(?:x{3000}){3000}`, 17
characters, takes 2.4 GB to compile, before any deadline on the search can apply. A pattern
is refused when this bound on its written-out size is over the limit.
"""

import re

# About 26 MB of compiled pattern at the engine's ~260 bytes per written-out atom.
MAX_EXPANSION = 100_000

_COUNT = re.compile(r"\{(\d*)(?:,(\d*))?\}")


def _class_end(pattern: str, start: int) -> int:
    """The index after the `]` that closes the character class opened at `start`."""
    i = start + 1
    if pattern.startswith("^", i):
        i += 1
    if pattern.startswith("]", i):
        i += 1
    while i < len(pattern) and pattern[i] != "]":
        i += 2 if pattern[i] == "\\" else 1
    return i + 1


def expansion(pattern: str) -> int:
    """An upper bound on the atoms the engine may write out for `pattern`.

    Each atom counts once, times every count of the repeats around it; alternatives and
    group syntax count as if in sequence, which only overestimates.
    """
    sizes = [0]  # the size of each sequence being read: the pattern, then open groups
    last = 0  # the size of the last atom, which a quantifier repeats
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "{" and (count := _COUNT.match(pattern, i)) and any(count.groups()):
            times = max(int(count.group(1) or 0), int(count.group(2) or 0))
            sizes[-1] += last * (times - 1)
            last *= times
            i = count.end()
            continue
        if char == "(":
            sizes.append(0)
            last = 0
            i += 1
            continue
        if char == ")" and len(sizes) > 1:
            last = sizes.pop()
            sizes[-1] += last
            i += 1
            continue
        if char == "\\":
            i += 2
        elif char == "[":
            i = _class_end(pattern, i)
        else:
            i += 1
        last = 1
        sizes[-1] += 1
    return sum(sizes)
