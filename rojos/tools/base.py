"""What a tool is: a name, a description written for the model, a parameter schema, and code."""

import functools
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from roject.models import Role


@dataclass(frozen=True, slots=True, kw_only=True)
class RojoToolContext:
    """Where and for whom a tool runs: the project's root and the acting user's role."""

    project_id: int
    project_root: Path
    user: Any = None
    role: Role = Role.VIEWER
    # Names the rojo has enabled for this user; None means every registered tool.
    enabled: frozenset[str] | None = field(default=None)
    # The conversation the call belongs to (None: a scratch history): results too large to
    # hand over whole are kept for it, and read_result reads only its own.
    conversation_id: int | None = None
    # Whether that conversation holds such results: read_result is offered only then.
    results_kept: bool = False
    # The API token the turn was asked with (None: a session, a command): once revoked or
    # expired, the turn ends at its next step or call, as a removed member's does.
    token_id: int | None = None
    # The login session it was asked in (None: a token, a command): once logged out, or the
    # password changed (which ends every other session), the turn ends the same way.
    session_key: str | None = None

    @property
    def can_write(self) -> bool:
        return Role(self.role).can_write


class RojoTool(ABC):
    """A tool the model can call. Subclasses set the class attributes and implement execute()."""

    name: ClassVar[str]
    description: ClassVar[str]
    parameters: ClassVar[dict]
    writes: ClassVar[bool] = False
    # For a tool that writes: whether a call may replace or remove what was there (MCP's
    # destructiveHint); one that only adds (a directory) says False.
    destructive: ClassVar[bool] = True
    # Whether a new rojo gets this tool without an administrator enabling it.
    default_enabled: ClassVar[bool] = True
    # A companion of kept results (read_result): offered to every rojo, whatever it
    # enables, but only in a conversation that holds one (ctx.results_kept).
    reads_kept_results: ClassVar[bool] = False
    # Whether what it changes is kept for undo (an MCP server's tools change what we
    # cannot see), whether its arguments are checked here against `parameters`, whether
    # every call waits for approval, and the MCP server it comes from, if any.
    undoable: ClassVar[bool] = True
    validates_arguments: ClassVar[bool] = True
    needs_approval: bool = False
    mcp_server: str | None = None

    @functools.cached_property
    def definition(self) -> dict:
        """The OpenAI function-calling schema for this tool. Made once per tool: every turn's
        requests hold the definitions they offer for as long as the turn streams, and the
        registry's tools are shared by all turns (nothing changes a definition once made)."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }

    # True when the call changes a file's content through a symlink rather than the link:
    # then the link's target is what gets kept for undo.
    follows_links: ClassVar[bool] = False

    def changed_paths(self, args: dict) -> list[str]:
        """The paths (relative to the root) whose current state a call replaces or removes.

        Used to ask for approval before an existing file is changed, and to keep what is
        needed to undo the call. Tools that write declare them; the default is none.
        """
        return []

    def preview(self, args: dict, ctx: RojoToolContext) -> dict:
        """What the call would change, for a person deciding whether to allow it (blocking)."""
        return {}

    @abstractmethod
    async def execute(self, args: dict, ctx: RojoToolContext) -> Any:
        """Run with validated arguments and return JSON-serialisable data.

        Raise ToolError for failures the model should read (the storage gate's StorageError
        and OSError count the same); the registry turns them into failed outcomes.
        """


def path_parameter(description: str) -> dict:
    return {"type": "string", "description": description}
