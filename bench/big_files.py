"""4. Big files: the read tools on a 50 MB file and a 20,000-entry directory.

Each call goes through the tool registry as the model's calls do. Time is measured without
tracing; peak memory in a second run under tracemalloc (Python allocations, the worker
thread's included).
"""

import asyncio
import json
import time
import tracemalloc
from dataclasses import dataclass
from pathlib import Path

BIG_FILE_MB = 50
ENTRIES = 20_000
_LINE = "{:>9} the quick brown fox jumps over the lazy dog, then reads the file again.\n"


@dataclass
class ToolCost:
    name: str
    args: dict
    seconds: float
    peak_mib: float
    result_bytes: int
    outcome: str


def files_create(root: Path) -> int:
    """A 50 MB text file (big.txt) and a directory of 20,000 files (many/); returns lines."""
    line_bytes = len(_LINE.format(0).encode())
    lines = BIG_FILE_MB * 1024 * 1024 // line_bytes
    with (root / "big.txt").open("w") as fh:
        for start in range(0, lines, 10_000):
            fh.write("".join(_LINE.format(n) for n in range(start, min(start + 10_000, lines))))
    many = root / "many"
    many.mkdir()
    for n in range(ENTRIES):
        (many / f"file-{n:05d}.txt").touch()
    return lines


def _outcome(result) -> str:
    if isinstance(result, dict) and set(result) == {"error"}:
        return f"refused: {result['error']}"
    if isinstance(result, list):
        return f"{len(result)} entries"
    if isinstance(result, dict) and "entries" in result:
        return f"{len(result['entries'])} of {result['total']} entries, cut={result['cut']}"
    if isinstance(result, dict) and "text" in result:
        return f"lines {result['startLine']}-{result['endLine']}, cut={result['cut']}"
    return f"{len(result)} chars"


async def _call(ctx, name: str, args: dict):
    from rojos.tools import registry

    return await registry.execute(name, json.dumps(args), ctx)


def tool_cost(ctx, name: str, args: dict) -> ToolCost:
    start = time.perf_counter()
    result = asyncio.run(_call(ctx, name, args))
    seconds = time.perf_counter() - start
    tracemalloc.start()
    asyncio.run(_call(ctx, name, args))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    from rojos.agent.history import tool_content

    return ToolCost(
        name=name,
        args=args,
        seconds=seconds,
        peak_mib=peak / 2**20,
        result_bytes=len(tool_content(result).encode()),
        outcome=_outcome(result),
    )


def big_files(project_id: int, root: Path) -> list[ToolCost]:
    from roject.models import Role
    from rojos.tools import RojoToolContext

    lines = files_create(root)
    ctx = RojoToolContext(project_id=project_id, project_root=root, role=Role.OWNER)
    calls = [
        ("get_text_content", {"path": "big.txt"}),
        ("get_text_content", {"path": "big.txt", "offset": 1, "limit": 200}),
        ("get_text_content", {"path": "big.txt", "offset": lines - 199, "limit": 200}),
        ("list_files", {"path": "many"}),
    ]
    return [tool_cost(ctx, name, args) for name, args in calls]
