"""A person's changes to a project's files, kept in the same ledger as a rojo's calls.

Every change made from the file panel (a new file or folder, a rename or move, a delete, a
save from the editor, an upload, a restore of an older version) takes the same path as a
rojo's tool call (rojos/agent/tool_calls.py): the project's change lock, the writer's role read
again, a snapshot of what it replaces, the change through the storage gate, and a
FileChange record finished with the digests and diffs of what it left. So it shows in the
file's history, can be undone like any other, and is published to the project's pages.
Where a built-in tool does the work (write, move, delete, create a directory), the tool
itself runs, with its checks and limits.
"""

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from asgiref.sync import sync_to_async
from django.core.exceptions import PermissionDenied
from django.db import transaction

from roject import storage
from roject.audit.log import AuditAction, AuditActor
from roject.members.access import project_role
from roject.members.live import project_event_publish
from roject.models import Role
from roject.storage import EntryExists, StorageError
from rojos.changes.file_audit import file_change_audit
from rojos.changes.undo import change_finish, cut_off_changes_finish
from rojos.models import FileChange
from rojos.tools import RojoToolContext, ToolError, registry
from rojos.tools.schema import validate

__all__ = ["EntryExists", "VersionConflict", "file_change_make", "file_tool_run"]

# A check run under the change lock before anything is copied or changed (blocking).
Check = Callable[[Path], None]
# The audited action a change is, and who acted.
Audited = tuple[AuditAction, AuditActor]


class VersionConflict(StorageError):
    """The file is no longer at the version the change started from (someone saved since)."""

    def __init__(self, message: str, *, current: dict | None, text: str | None) -> None:
        super().__init__(message)
        self.current = current  # the version now (None: the file is gone)
        self.text = text  # its text, when it is small text


def _start(*, project_id: int, user, origin: str, tool: str, paths: list[str], check):
    """(Blocking, under the change lock) The writer's role now, the records of changes a
    crash cut off finished (undo.cut_off_changes_finish), the caller's check, then a
    snapshot of the paths and the change's record (stored now when it replaces something,
    so a crash during the change cannot lose the copy)."""
    role = project_role(user=user, project_id=project_id)
    if role is None or not role.can_write:
        raise PermissionDenied("Your role in this project is read-only.")
    root = storage.project_root_create(project_id)
    cut_off_changes_finish(project_id=project_id, root=root)  # before anything changes
    if check is not None:
        check(root)
    snapshot = storage.snapshot_take(project_id, root, paths)
    change = FileChange(
        project_id=project_id,
        author=user,
        origin=origin,
        tool=tool,
        paths=snapshot.paths,
        before=snapshot.existed,
        after=None,
        created_parents=snapshot.missing_parents,
        key=snapshot.key,
    )
    if any(snapshot.existed):
        change.save()
    return change


def _finish(project_id: int, change: FileChange, audited: Audited | None) -> FileChange | None:
    """(Blocking) Record what the change left, with its audit entry if it is an audited
    action; None (and no record) when it changed nothing."""
    finished = change_finish(storage.project_root_create(project_id), change)
    if finished is not None:
        with transaction.atomic():
            finished.save()
            if audited is not None:
                action, actor = audited
                file_change_audit(change=finished, action=action, actor=actor)
    return finished


async def file_change_make(
    *,
    project_id: int,
    user,
    origin: str,
    tool: str,
    paths: list[str],
    work: Callable[[], Awaitable[Any]],
    check: Check | None = None,
    audited: Audited | None = None,
) -> tuple[Any, FileChange | None]:
    """Make one recorded change: `work` runs holding the project's change lock, after
    `check` passed and the paths were copied aside; returns what it returned and the record.

    A change that fails part way is recorded all the same when it changed something, so
    what it did can be undone. `audited` (an action and its actor) writes the change's
    audit entry with its record.
    """
    start = {"project_id": project_id, "user": user, "origin": origin, "tool": tool}
    start.update(paths=paths, check=check)
    async with storage.changes_locked(project_id, then=lambda: _start(**start)) as change:
        try:
            value = await work()
        finally:
            finished = await sync_to_async(_finish)(project_id, change, audited)
    if finished is not None:
        await change_published(finished)
    return value, finished


def _author_name(change: FileChange) -> str | None:
    """The author's username if the row holds the user already (no query from the loop)."""
    if change.author_id is None or not FileChange.author.is_cached(change):
        return None
    return change.author.get_username()


async def change_published(change: FileChange) -> None:
    """Tell the project's open pages that files changed."""
    await project_event_publish(
        project_id=change.project_id,
        kind="files",
        data={
            "change": change.pk,
            "paths": change.paths,
            "origin": change.origin,
            "tool": change.tool,
            "author": _author_name(change),
        },
    )


def _tool_paths(tool, args: dict, root: Path) -> list[str]:
    paths = tool.changed_paths(args)
    if tool.follows_links:  # what a write through a link changes is its target
        with contextlib.suppress(StorageError, OSError):
            paths = [str(storage.resolved_relative(root, p)) for p in paths]
    return paths


async def file_tool_run(
    *,
    project_id: int,
    user,
    tool_name: str,
    args: dict,
    origin: str = FileChange.Origin.PERSON,
    check: Check | None = None,
    audited: Audited | None = None,
) -> tuple[Any, FileChange | None]:
    """Run a built-in changing tool for a person, recorded; its errors are raised
    (ToolError, StorageError) for the API to answer."""
    tool = registry.get(tool_name)
    if tool is None or not tool.writes:
        raise ToolError(f"no changing tool {tool_name!r}")
    validate(args, tool.parameters)
    root = storage.project_root_create(project_id)
    ctx = RojoToolContext(project_id=project_id, project_root=root, user=user, role=Role.EDITOR)
    paths = await asyncio.to_thread(_tool_paths, tool, args, root)

    async def work():
        return await tool.execute(args, ctx)

    return await file_change_make(
        project_id=project_id,
        user=user,
        origin=origin,
        tool=tool_name,
        paths=paths,
        work=work,
        check=check,
        audited=audited,
    )
