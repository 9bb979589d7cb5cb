"""How much of an MCP server's tool list a session keeps: a server's output is untrusted.

A server may list thousands of tools, or descriptions and schemas of megabytes; all of it
would go into every model request of every turn that uses the server, and into the stored
listing. So a session keeps at most MAX_TOOLS tools, cuts descriptions to MAX_DESCRIPTION
characters with a note, and leaves out (logged) a tool whose schema is over MAX_SCHEMA_BYTES.
It also leaves out a tool that runs only as a task (`execution.taskSupport` "required"):
the client starts no MCP tasks, and the server refuses every plain call to such a tool.
"""

import json
import logging

import mcp_types as types

logger = logging.getLogger("rojos.mcp")

MAX_TOOLS = 128
MAX_DESCRIPTION = 2048
MAX_SCHEMA_BYTES = 16 * 1024
_CUT = " … (description cut: it was over 2,048 characters)"


def tools_bounded(tools: list[types.Tool], server: str) -> list[types.Tool]:
    """The tools a session keeps of what `server` listed, in its order."""
    kept: list[types.Tool] = []
    for tool in tools:
        if tool.execution is not None and tool.execution.task_support == "required":
            logger.info(
                "MCP server %s: tool %r left out, it runs only as a task", server, tool.name
            )
            continue
        if len(kept) >= MAX_TOOLS:
            logger.warning(
                "MCP server %s lists over %d tools; the rest are left out", server, MAX_TOOLS
            )
            break
        schema = json.dumps(tool.input_schema, separators=(",", ":"), default=str)
        if len(schema) > MAX_SCHEMA_BYTES:
            logger.warning(
                "MCP server %s: tool %r left out, its schema is %d bytes (over %d)",
                server, tool.name, len(schema), MAX_SCHEMA_BYTES,
            )  # fmt: skip
            continue
        cut = {}
        for field in ("description", "title"):
            text = getattr(tool, field)
            if text and len(text) > MAX_DESCRIPTION:
                cut[field] = text[:MAX_DESCRIPTION] + _CUT
        kept.append(tool.model_copy(update=cut) if cut else tool)
    return kept
