"""Calls through the endpoint that would wait for an owner, refused instead.

With a project's "changes need approval by an owner" on, a rojo's call in a non-owner's
turn that changes what is there waits for an owner (rojos/agent/approval_gate.py). An MCP call
has nobody to wait for: the outside agent's client holds the connection and no owner sees
it. So such a call by a non-owner's token is a tool error saying where the change can be
made and approved; a call that only adds (a new file, a new folder) runs as before, as it
would in the chat without asking.
"""

import contextlib
from pathlib import Path

from roject import storage
from roject.models import Project, Role
from roject.storage import StorageError

from ..tools import RojoTool


def _changes_existing(tool: RojoTool, arguments: dict, root: Path) -> bool:
    try:
        paths = tool.changed_paths(arguments)
    except (KeyError, TypeError):  # arguments a tool of your own did not check: assume so
        return True
    for relative in paths:
        with contextlib.suppress(StorageError):
            if storage.entry_exists(root, relative):
                return True
    return False


def owner_approval_refusal(
    *, tool: RojoTool, arguments: dict, role: Role, project_id: int, root: Path
) -> str | None:
    """(Blocking) Why the call must not run, when it would need an owner's approval."""
    if role == Role.OWNER or not tool.writes:
        return None
    if not Project.objects.filter(pk=project_id, owner_approval=True).exists():
        return None
    if not (tool.needs_approval or _changes_existing(tool, arguments, root)):
        return None
    return (
        f"tool {tool.name!r} would change what is in the project, and in this project such "
        "changes need approval by an owner, which a call through MCP cannot wait for; an "
        "owner must approve such changes in the app (a rojo's call there waits for one)"
    )
