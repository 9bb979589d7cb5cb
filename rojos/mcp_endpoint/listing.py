"""The project's tools as MCP tools: our names, descriptions and schemas, with hints.

The endpoint serves the built-in tools; tools of your own (`@rojo_tool`, ROJO_TOOL_MODULES)
are off until an administrator enables them per rojo, and no rojo stands behind an MCP
call, so they are served only when ROJO_MCP_SERVE_USER_TOOLS says so.
"""

import mcp_types as types
from django.conf import settings

from ..tools import BUILTIN_TOOLS, RojoTool, RojoToolRegistry

_BUILTIN_NAMES = frozenset(cls.name for cls in BUILTIN_TOOLS)


def served(tool: RojoTool) -> bool:
    """Whether the endpoint offers and runs this tool (settings read at call time)."""
    return tool.name in _BUILTIN_NAMES or settings.ROJO_MCP_SERVE_USER_TOOLS


def served_names(tools: RojoToolRegistry) -> frozenset[str]:
    return frozenset(tool.name for tool in tools if served(tool))


def mcp_tool(tool: RojoTool) -> types.Tool:
    """One tool as MCP lists it. Clients read the hints to decide what to ask before."""
    annotations = types.ToolAnnotations(
        read_only_hint=not tool.writes,
        destructive_hint=tool.destructive if tool.writes else None,
        open_world_hint=False,  # only the project's files
    )
    return types.Tool(
        name=tool.name,
        description=tool.description,
        input_schema=tool.parameters,
        annotations=annotations,
    )


def mcp_tools(tools: RojoToolRegistry, *, can_write: bool) -> list[types.Tool]:
    """Every served tool the caller may use: the writing ones only when it may write
    (as a viewer's rojo is offered only the tools that read)."""
    return [mcp_tool(tool) for tool in tools if served(tool) and (can_write or not tool.writes)]
