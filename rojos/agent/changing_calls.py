"""Calls that change files: which they are, what is kept before one runs (the user's right
to write checked again, the record and the copy of what the paths held), and the clean-up
after those a crash cut off."""

import contextlib
from pathlib import Path, PurePosixPath

from roject import storage
from roject.members.access import project_role
from roject.storage import DiskFull, PathError, StorageError
from rojos.agent.history import History
from rojos.agent.read_versions import ReadVersions
from rojos.changes.undo import cut_off_changes_finish
from rojos.models import Conversation, FileChange
from rojos.tools import RojoTool, RojoToolContext, RojoToolRegistry, ToolCall, ToolError
from rojos.tools.schema import validate

__all__ = ["ChangeRevoked", "ChangeStale", "change_start", "changing_call", "cut_off_writes_clean"]


class ChangeRevoked(Exception):
    """The person the turn runs for may no longer change the project's files."""


class ChangeStale(Exception):
    """A file the turn read changed since; the message says so to the model."""


class ChangeUncopied(Exception):
    """What the call would change could not be copied for its undo (a FIFO or a socket in a
    folder to delete, a file the server may not read): the call is refused, not run with
    nothing to undo it by. The message says why to the model."""


def changing_call(tools: RojoToolRegistry, call: ToolCall) -> tuple[RojoTool, dict] | None:
    """The tool and valid arguments of a call that may change files, else None."""
    tool = tools.get(call.name)
    if tool is None or not tool.writes or not tool.undoable or call.args is None:
        return None
    try:
        validate(call.args, tool.parameters)
        tool.changed_paths(call.args)
    except (ToolError, KeyError, TypeError):
        return None  # the registry reports the bad arguments
    return tool, call.args


def cut_off_writes_clean(root: Path, calls: list[dict], tools: RojoToolRegistry) -> None:
    """(Blocking) Remove what writes cut off by a crash left next to their targets.

    Hold the project's change lock: every write to a project runs under it.
    """
    directories = set()
    for call in calls:
        changing = changing_call(tools, ToolCall.of(call))
        if changing is None:
            continue
        tool, args = changing
        for path in tool.changed_paths(args):
            directories.add(str(PurePosixPath(path).parent))
            if tool.follows_links:  # a write through a link writes next to its target
                with contextlib.suppress(StorageError, OSError):
                    directories.add(str(storage.resolved_relative(root, path).parent))
    storage.temp_files_remove(root, directories)


def _snapshot_take(ctx: RojoToolContext, tool: RojoTool, args: dict) -> storage.Snapshot:
    root = ctx.project_root
    paths = tool.changed_paths(args)
    if tool.follows_links:
        paths = [str(storage.resolved_relative(root, p)) for p in paths]
    return storage.snapshot_take(ctx.project_id, root, paths)


def change_start(
    *,
    ctx: RojoToolContext,
    history: History,
    reads: ReadVersions,
    tool: RojoTool,
    args: dict,
    call_id: str,
    message_id,
) -> FileChange | None:
    """(Blocking, the project's change lock held) Copy the paths' state aside and make the
    change's record, unfinished.

    First, the person the turn runs for must still be allowed to write: a turn keeps
    running after its user was removed from the project or made a viewer (ChangeRevoked).

    When the call may replace or remove something, the record is stored now, so that a
    crash during the call cannot lose the copy of what was there. A call that only
    creates paths is recorded with its result: cut off, it leaves a new path and nothing
    lost. None when a path is not one a tool takes (PathError): the call then fails on
    it, so there is nothing to undo. DiskFull when the copy would not fit, ChangeUncopied
    when what is there cannot be copied: the call is refused.
    """
    user = ctx.user
    if user is not None:
        role = project_role(user=user, project_id=ctx.project_id)
        if role is None or not role.can_write:
            raise ChangeRevoked
    # What a crash cut off is recorded as it left the files, before this call changes them.
    cut_off_changes_finish(project_id=ctx.project_id, root=ctx.project_root)
    if reads.seen and (stale := reads.stale(tool.changed_paths(args))):
        raise ChangeStale(stale)
    try:
        snapshot = _snapshot_take(ctx, tool, args)
    except DiskFull:
        raise  # a change that could not be undone is not made
    except PathError:
        return None
    except (StorageError, OSError) as exc:
        reason = str(exc) if isinstance(exc, StorageError) else exc.strerror or repr(exc)
        raise ChangeUncopied(
            f"{reason}; nothing was changed: no copy of it could be kept for undo"
        ) from exc
    conversation = history.conversation
    change = FileChange(
        project_id=ctx.project_id,
        conversation=conversation if conversation.pk else None,
        message_id=message_id,
        tool_call_id=call_id,
        author_id=getattr(user, "pk", user),
        origin=_origin(conversation),
        tool=tool.name,
        paths=snapshot.paths,
        before=snapshot.existed,
        after=None,
        created_parents=snapshot.missing_parents,
        key=snapshot.key,
    )
    if hasattr(user, "get_username"):
        change.author = user  # held, so that publishing the change asks no query
    if any(snapshot.existed):
        change.save()
    return change


def _origin(conversation: Conversation) -> str:
    """Whose call this is in the ledger: an outside agent's through MCP, or a rojo's."""
    return FileChange.Origin.MCP if conversation.via_mcp else FileChange.Origin.ROJO
