"""A write tool that waits until the test lets it go, and its fixture (a pytest plugin of
tests/conftest.py): for tests that act (a decision, a client leaving) while a call is
surely still open and running."""

import asyncio
import threading

import pytest

from roject.storage import write_project_file
from rojos.tools import RojoTool, RojoToolContext, registry


class HeldWrite(RojoTool):
    """Writes a file once the test lets it go (`release`); says when it started (`started`)."""

    name = "held_write"
    description = "Write text to a file when released."
    parameters = {
        "type": "object",
        "properties": {"path": {"type": "string"}, "text": {"type": "string"}},
        "required": ["path", "text"],
    }
    writes = True

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()

    def changed_paths(self, args: dict) -> list[str]:
        return [args["path"]]

    async def execute(self, args: dict, ctx: RojoToolContext) -> dict:
        self.started.set()
        if not await asyncio.to_thread(self.release.wait, 20):
            return {"error": "the test never released the write"}
        await asyncio.to_thread(write_project_file, ctx.project_root, args["path"], args["text"])
        return {"ok": True}


@pytest.fixture
def held_write():
    """The tool, registered for the test; released and unregistered after it (a test that
    failed before its release leaves no thread waiting)."""
    tool = registry.register(HeldWrite())
    yield tool
    tool.release.set()
    registry.unregister(tool.name)
