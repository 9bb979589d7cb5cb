"""A tool whose answer is about 3 MB, for the tests of results paged, not cut (#36)."""

import pytest

from rojos.tools import RojoTool, RojoToolContext, registry

# About 3 MB of search-like lines, each saying where it is.
BIG = "".join(
    f"src/module_{n:06}.py:{n}: match number {n:06} of the big search\n" for n in range(48_000)
)


class BigSearch(RojoTool):
    """A search whose answer is ~3 MB (the built-in one caps its matches)."""

    name = "big_search"
    description = "Search everything."
    parameters = {"type": "object", "properties": {}}

    async def execute(self, args: dict, ctx: RojoToolContext) -> str:
        return BIG


@pytest.fixture
def big_search():
    tool = registry.register(BigSearch())
    yield tool
    registry.unregister(tool.name)
