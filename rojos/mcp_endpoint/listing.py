"""The project's tools as MCP tools: our names, descriptions and schemas, with hints."""

import mcp_types as types

from ..tools import RojoTool, RojoToolRegistry


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
    """Every registered tool the caller may use: the writing ones only when it may write
    (as a viewer's rojo is offered only the tools that read)."""
    return [mcp_tool(tool) for tool in tools if can_write or not tool.writes]
