"""The tool registry: name -> tool, and the boundary where every failure becomes a value."""

import logging
from typing import Any

from roject.storage import StorageError
from rojos.tool_names import WIRE_NAME, wire_name_valid

from .arguments import ToolCall
from .base import RojoTool, RojoToolContext
from .outcome import ToolError, ToolOutcome, echoed
from .schema import validate

logger = logging.getLogger(__name__)


class RojoToolRegistry:
    """Holds tool instances by name; a bad or duplicate name fails at registration."""

    def __init__(self, tools: list[RojoTool] = ()) -> None:
        self._tools: dict[str, RojoTool] = {}
        for tool in tools:
            self.register(tool)

    def register(self, tool: RojoTool) -> RojoTool:
        name = getattr(tool, "name", None)
        if not wire_name_valid(name):
            raise ValueError(f"tool name {name!r} must match {WIRE_NAME.pattern}")
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

    async def prepare(self, ctx: RojoToolContext) -> None:
        """Before a model step: bring tools from elsewhere up to date (MCP servers)."""

    def available(self, ctx: RojoToolContext) -> list[RojoTool]:
        """The tools this context may call: enabled for the rojo and allowed for the role;
        read_result only where a result is kept (elsewhere it would only lengthen requests)."""
        return [
            tool
            for tool in self._tools.values()
            if self._refusal(tool, ctx) is None
            and (ctx.results_kept or not tool.reads_kept_results)
        ]

    def definitions(self, names: list[str] | None = None) -> list[dict]:
        """OpenAI tool schemas, for all tools or the named ones (unknown names are skipped)."""
        if names is None:
            return [tool.definition for tool in self._tools.values()]
        return [self._tools[n].definition for n in names if n in self._tools]

    def _refusal(self, tool: RojoTool, ctx: RojoToolContext) -> str | None:
        if tool.reads_kept_results:
            return None  # every rojo's; it reads only the conversation's own results
        if ctx.enabled is not None and tool.name not in ctx.enabled:
            return f"tool {tool.name!r} is not enabled for this rojo"
        if tool.writes and not ctx.can_write:
            return f"tool {tool.name!r} changes files, and your role in this project is read-only"
        return None

    async def run(self, call: ToolCall, ctx: RojoToolContext) -> ToolOutcome:
        """Run a parsed call. Never raises: every failure is an outcome the model reads."""
        tool = self._tools.get(call.name)
        if tool is None:
            offered = ", ".join(t.name for t in self.available(ctx)) or "none"
            named = echoed(call.name)
            return ToolOutcome.failure(f"unknown tool {named!r}; available tools: {offered}")
        refusal = self._refusal(tool, ctx)
        if refusal:
            return ToolOutcome.failure(refusal)
        if call.args is None:
            return ToolOutcome.failure(call.problem)
        try:
            if tool.validates_arguments:
                validate(call.args, tool.parameters)
            return ToolOutcome.success(await tool.execute(call.args, ctx))
        except (ToolError, StorageError) as exc:
            return ToolOutcome.failure(str(exc))
        except OSError as exc:
            return ToolOutcome.failure(exc.strerror or exc.__class__.__name__)
        except Exception:
            logger.exception("tool %r failed", call.name)
            return ToolOutcome.failure(
                f"tool {call.name!r} failed unexpectedly; see the server log"
            )

    async def execute(self, name: str, arguments: str | dict | None, ctx: RojoToolContext) -> Any:
        """Run a call and return what the model reads: the value, or {"error": "..."}."""
        return (await self.run(ToolCall.parse("", name, arguments), ctx)).result
