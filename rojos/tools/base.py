"""What a tool is: a name, a description written for the model, a parameter schema, and code."""

import difflib
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from roject import storage
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

    @property
    def can_write(self) -> bool:
        return self.role in (Role.EDITOR, Role.OWNER)


class RojoTool(ABC):
    """A tool the model can call. Subclasses set the class attributes and implement execute()."""

    name: ClassVar[str]
    description: ClassVar[str]
    parameters: ClassVar[dict]
    writes: ClassVar[bool] = False
    # Whether a new rojo gets this tool without an administrator enabling it.
    default_enabled: ClassVar[bool] = True

    @property
    def definition(self) -> dict:
        """The OpenAI function-calling schema for this tool."""
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

        Raise roject.storage.StorageError (or OSError) for failures the model should read;
        the registry turns them into {"error": ...} results.
        """


def _diff_lines(text: str) -> list[str]:
    """Lines split at newlines only; splitlines() also splits at form feeds, U+2028 and more."""
    lines = text.split("\n")
    return [line + "\n" for line in lines[:-1]] + ([lines[-1]] if lines[-1] else [])


def unified_diff(path: str, before: str, after: str) -> str:
    """A unified diff; a last line without newline is marked as git marks it."""
    lines = difflib.unified_diff(
        _diff_lines(before), _diff_lines(after), fromfile=f"a/{path}", tofile=f"b/{path}"
    )
    return "".join(
        line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines
    )


def text_diff(project_root: Path, path: str, new_text: str) -> str:
    """The diff from a file's current text (empty when it does not exist yet) to `new_text`."""
    try:
        before = storage.read_project_file(project_root, path)
    except storage.StorageError as exc:
        entry = storage.resolve_entry(project_root, path)
        if entry.exists() or entry.is_symlink():
            return f"(replaces {path!r}, which cannot be shown as text: {exc})\n"
        before = ""
    return unified_diff(path, before, new_text)


def path_parameter(description: str) -> dict:
    return {"type": "string", "description": description}
