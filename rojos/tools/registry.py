"""The tool registry: name -> tool, and the boundary where every failure becomes a value."""

import json
import logging
import re
from typing import Any

from roject.storage import StorageError

from .base import RojoTool, RojoToolContext
from .schema import ArgumentError, validate

logger = logging.getLogger(__name__)

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def tool_error(message: str) -> dict:
    return {"error": message}


def is_error(result: Any) -> bool:
    """True for the {"error": ...} values that failed tool calls return."""
    return isinstance(result, dict) and set(result) == {"error"}


def parse_arguments(arguments: str | dict | None) -> dict:
    """Tool-call arguments as a dict: a JSON object string, "" or None (no arguments)."""
    if isinstance(arguments, dict):
        return arguments
    if arguments is not None and not isinstance(arguments, str):
        raise ArgumentError("arguments must be a JSON object")
    if arguments is None or arguments.strip() == "":
        return {}
    try:
        parsed = json.loads(arguments)
    except json.JSONDecodeError as exc:
        raise ArgumentError(
            f"arguments are not valid JSON ({exc.msg} at position {exc.pos}); "
            "send a JSON object matching the tool's parameters"
        ) from None
    if not isinstance(parsed, dict):
        raise ArgumentError("arguments must be a JSON object")
    return parsed


class RojoToolRegistry:
    """Holds tool instances by name; a bad or duplicate name fails at registration."""

    def __init__(self, tools: list[RojoTool] = ()) -> None:
        self._tools: dict[str, RojoTool] = {}
        for tool in tools:
            self.register(tool)

    def register(self, tool: RojoTool) -> RojoTool:
        name = getattr(tool, "name", None)
        if not isinstance(name, str) or not _NAME.match(name):
            raise ValueError(f"tool name {name!r} must match {_NAME.pattern}")
        if name in self._tools:
            raise ValueError(f"a tool named {name!r} is already registered")
        if tool.parameters.get("type") != "object":
            raise ValueError(f"tool {name!r}: parameters must be a JSON schema of type object")
        self._tools[name] = tool
        return tool

    def unregister(self, name: str) -> None:
        """Remove a tool (an app being unloaded, or a test cleaning up)."""
        self._tools.pop(name, None)

    def __contains__(self, name: str) -> bool:
        return name in self._tools

    def __iter__(self):
        return iter(self._tools.values())

    def names(self) -> list[str]:
        return list(self._tools)

    def get(self, name: str) -> RojoTool | None:
        return self._tools.get(name)

    def available(self, ctx: RojoToolContext) -> list[RojoTool]:
        """The tools this context may call: enabled for the rojo and allowed for the role."""
        return [tool for tool in self._tools.values() if self._refusal(tool, ctx) is None]

    def definitions(self, names: list[str] | None = None) -> list[dict]:
        """OpenAI tool schemas, for all tools or the named ones (unknown names are skipped)."""
        if names is None:
            return [tool.definition for tool in self._tools.values()]
        return [self._tools[n].definition for n in names if n in self._tools]

    def _refusal(self, tool: RojoTool, ctx: RojoToolContext) -> str | None:
        if ctx.enabled is not None and tool.name not in ctx.enabled:
            return f"tool {tool.name!r} is not enabled for this rojo"
        if tool.writes and not ctx.can_write:
            return f"tool {tool.name!r} changes files, and your role in this project is read-only"
        return None

    async def execute(self, name: str, arguments: str | dict | None, ctx: RojoToolContext) -> Any:
        """Run a tool call. Never raises: every failure comes back as {"error": "..."}."""
        tool = self._tools.get(name)
        if tool is None:
            offered = ", ".join(t.name for t in self.available(ctx)) or "none"
            return tool_error(f"unknown tool {name!r}; available tools: {offered}")
        refusal = self._refusal(tool, ctx)
        if refusal:
            return tool_error(refusal)
        try:
            args = parse_arguments(arguments)
            validate(args, tool.parameters)
            return await tool.execute(args, ctx)
        except (ArgumentError, StorageError) as exc:
            return tool_error(str(exc))
        except OSError as exc:
            return tool_error(exc.strerror or exc.__class__.__name__)
        except Exception:
            logger.exception("tool %r failed", name)
            return tool_error(f"tool {name!r} failed unexpectedly; see the server log")
