"""A tool that runs until the test lets it go, loaded through ROJO_TOOL_MODULES: for tests
that act (a client leaving) while a call is under way."""

import asyncio

from roject.storage import entry_exists, read_project_file, write_project_file
from rojos.tools import RojoTool, RojoToolContext, registry


class StampWhenReleasedTool(RojoTool):
    """Says it started (`<path>.started`), waits for `<path>.release`, then stamps `<path>`."""

    name = "stamp_when_released"
    description = "Stamp a file once the test lets the call go on."
    parameters = {
        "type": "object",
        "properties": {"path": {"type": "string", "description": "The file to stamp."}},
        "required": ["path"],
    }
    writes = True

    def changed_paths(self, args: dict) -> list[str]:
        return [args["path"]]

    async def execute(self, args: dict, ctx: RojoToolContext) -> dict:
        root, path = ctx.project_root, args["path"]
        await asyncio.to_thread(write_project_file, root, f"{path}.started", "")
        # The test's signal is a file it writes from another process.
        while not await asyncio.to_thread(entry_exists, root, f"{path}.release"):  # noqa: ASYNC110
            await asyncio.sleep(0.02)
        text = await asyncio.to_thread(read_project_file, root, path)
        await asyncio.to_thread(write_project_file, root, path, text + "stamp\n")
        return {"ok": True}


registry.register(StampWhenReleasedTool())
