"""Both ways the storage gate resolves a path, for tests to run on each: openat2, and the walk
component by component that replaces it where the kernel has none (forced by openat2.ENABLED)."""

import pytest

from roject.storage import openat2

RESOLVERS = ["openat2", "walk"]


def resolver_use(name: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """Make the gate resolve with `name` for one test; skip openat2 where the kernel lacks it."""
    if name == "walk":
        monkeypatch.setattr(openat2, "ENABLED", False)
    elif not openat2.openat2_in_use():
        pytest.skip("this kernel has no openat2 (Linux >= 5.6)")
    return name
