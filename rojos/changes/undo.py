"""Undo for any recorded change (a rojo's, a person's): the records, and when an undo may happen.

Before a change, the storage gate copies the previous state of each path aside (a snapshot);
after it, a digest of each path is recorded. An undo restores the snapshot only while every
path still has that digest, so newer work made since (by a person or a later call) is never
overwritten. Every file operation is the gate's (roject.storage); this module keeps the
records, compares the digests and says why an undo is refused.
"""

import asyncio
import contextlib
import functools
import logging
from pathlib import Path

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.utils import timezone

from roject.audit.log import AuditAction, AuditActor, audit_record
from roject.members.access import project_role
from roject.server.prepared_queries import PreparedQuery
from roject.storage import (
    Snapshot,
    StorageError,
    changes_locked,
    digests,
    entry_exists,
    project_root_create,
    read_project_file,
    reported,
    snapshot_digests,
    snapshot_discard,
    snapshot_of,
    snapshot_restore,
    snapshot_text,
)
from rojos.models import Conversation, FileChange, Message
from rojos.tools.diff import unified_diff

logger = logging.getLogger(__name__)


class UndoRefused(StorageError):
    """The change cannot be undone (the files changed since, or it was undone already)."""


class UndoneAlready(UndoRefused):
    """Another request undid the change first (a double click, two tabs)."""


def _text_now(root: Path, path: str) -> str | None:
    """A path's text now: "" when absent, None when it is no small text file."""
    try:
        return read_project_file(root, path)
    except StorageError:
        with contextlib.suppress(StorageError):
            if not entry_exists(root, path):
                return ""
        return None


def _diffs(root: Path, snapshot: Snapshot) -> list[str]:
    """Per path, the diff of its text from the snapshot to now ("" when either is no text)."""
    limit = settings.ROJO_MAX_READ_BYTES
    found = []
    for number, path in enumerate(snapshot.paths):
        before = snapshot_text(snapshot, number, limit)
        after = None if before is None else _text_now(root, path)
        found.append("" if after is None else unified_diff(path, before, after))
    return found


def snapshot_for(change: FileChange) -> Snapshot:
    """The snapshot a change record stands for."""
    return snapshot_of(
        project_id=change.project_id,
        key=change.key,
        paths=change.paths,
        existed=change.before,
        missing_parents=change.created_parents,
    )


def change_finish(root: Path, change: FileChange) -> FileChange | None:
    """(Blocking) Set the record's digests of the paths as its call left them, unsaved.

    A call that changed nothing keeps no record: it is deleted (if stored), with its copies,
    and None returned. What the paths were before is read off the copies (absent: they did
    not exist).
    """
    snapshot = snapshot_for(change)
    with reported(", ".join(change.paths)):
        before = snapshot_digests(snapshot)
        after = digests(root, change.paths)
    if after == before:
        if change.pk is not None:
            change.delete()
        snapshot_discard(snapshot)
        return None
    change.after = after
    change.diffs = _diffs(root, snapshot)
    return change


# Every change and undo reads it first: compiled once (roject/server/prepared_queries.py),
# and put in order here: an ORDER BY would have the query read every change of the project
# through its time index, not the few unfinished ones through theirs
# (file_change_unfinished): 0.25 ms a change with 4,000 before it, 0.004 ms now.
_UNFINISHED = PreparedQuery(
    lambda project_id: FileChange.objects.filter(
        project_id=project_id, after__isnull=True
    ).order_by(),
    int,
)


def cut_off_changes_finish(*, project_id: int, root: Path) -> None:
    """(Blocking, holding the project's change lock) Finish the records of the changes a
    crash cut off while they ran: every record of the project still unfinished.

    A change's record is stored and finished while its process holds the lock, so one
    unfinished while the lock is held here is one whose process died. A write is atomic,
    so each path is as it was before the change or as the change left it: as long as no
    later change has run, the record can say which. Hence this is the first thing every
    change and undo does under the lock: a record finished after someone saved over the
    file would credit their work to the cut-off change, and its undo would throw it away.
    A change whose rename never happened changed nothing: its record is dropped.
    """
    unfinished = _UNFINISHED.all(project_id)
    for change in sorted(unfinished, key=lambda change: (change.created, change.pk)):
        try:
            finished = change_finish(root, change)
        except StorageError:  # left unfinished; an undo of it tries again and says why
            logger.warning("could not finish the change record %s", change.pk, exc_info=True)
            continue
        if finished is not None:
            finished.save(update_fields=["after", "diffs"])


_RUNNING = "a reply is still running in this conversation; undo when it is done"


def _undo_start(change: FileChange, user) -> None:
    """(Blocking, the change lock held) What the undo checked before it waited for the
    lock, checked again now: the person may still write (removed from the project or made
    a viewer meanwhile: PermissionDenied, as a person's own change is refused), and no
    reply started in the change's conversation (UndoRefused); then the records of changes a
    crash cut off are finished (cut_off_changes_finish)."""
    if user is not None:
        role = project_role(user=user, project_id=change.project_id)
        if role is None or not role.can_write:
            raise PermissionDenied("Your role in this project is read-only.")
    if Conversation.objects.running().filter(pk=change.conversation_id).exists():
        raise UndoRefused(_RUNNING)
    cut_off_changes_finish(
        project_id=change.project_id, root=project_root_create(change.project_id)
    )


def _cut_off_record(change: FileChange) -> None:
    """(Blocking, under the lock) Read the cut-off change's record as cut_off_changes_finish
    left it; UndoRefused when it changed nothing, the StorageError that says why when its
    files cannot be read."""
    found = FileChange.objects.filter(pk=change.pk).values_list("after", "diffs").first()
    if found is None:
        raise UndoRefused("the call was cut off before it changed anything")
    change.after, change.diffs = found
    if change.after is None:
        if change_finish(project_root_create(change.project_id), change) is None:
            raise UndoRefused("the call was cut off before it changed anything")
        change.save(update_fields=["after", "diffs"])


def _undo_cut_off(now: list[str | None], change: FileChange, snapshot: Snapshot) -> bool:
    """(Blocking) Whether the paths are as an undo of `change` that a crash cut off leaves
    them: each as the change left it or as its copy has it (put back already), every copy
    still there. Finishing that undo loses nothing: no path holds anything else."""
    before = snapshot_digests(snapshot)
    if any(existed and copy is None for existed, copy in zip(change.before, before, strict=True)):
        return False
    return all(n in (a, b) for n, a, b in zip(now, change.after, before, strict=True))


def _restore(change: FileChange) -> None:
    """Put every path back as the snapshot has it, if none changed since (blocking); the
    snapshot is kept, for the undo to be recorded before it goes."""
    root = project_root_create(change.project_id)
    snapshot = snapshot_for(change)
    now = digests(root, change.paths)
    if now != change.after and not _undo_cut_off(now, change, snapshot):
        by = "the rojo's" if change.origin == FileChange.Origin.ROJO else "the"
        raise UndoRefused(
            f"{', '.join(change.paths)} changed since {by} {change.tool}; "
            "undo refused so that newer work is not lost"
        )
    snapshot_restore(root, snapshot, discard=False)


async def change_undo(*, change: FileChange, user, actor: AuditActor | None = None) -> FileChange:
    """Undo one recorded change, or raise UndoRefused; audited, by `actor` (default: `user`)."""
    if change.undone is not None:
        raise UndoneAlready("this change was undone already")
    if await Conversation.objects.running().filter(pk=change.conversation_id).aexists():
        raise UndoRefused(_RUNNING)  # told at once; checked again once the lock is held
    start = functools.partial(_undo_start, change, user)
    async with changes_locked(change.project_id, then=start):
        if await FileChange.objects.filter(pk=change.pk, undone__isnull=False).aexists():
            raise UndoneAlready("this change was undone already")
        if change.after is None:  # its call was cut off: its record was finished just now
            await sync_to_async(_cut_off_record)(change)
        await asyncio.to_thread(_restore, change)
        # Marked undone before the lock goes: a backup (roject/backup), which holds every
        # change lock, never finds the files put back and the change not yet undone. The
        # copy goes only once it is marked: an undo a crash cut off before (some paths put
        # back, or all) is told from newer work by it, and finished by the next undo.
        change.undone = timezone.now()
        change.undone_by = user
        await sync_to_async(_undone_save)(change, actor or AuditActor(user=user))
        await asyncio.to_thread(snapshot_discard, snapshot_for(change))
    return change


def _undone_save(change: FileChange, actor: AuditActor) -> None:
    """(Blocking) Mark the change undone, and the tool message of the call that made it
    (the model is told at its next request: rojos.provider.request), and audit it, in one
    transaction."""
    with transaction.atomic():
        change.save(update_fields=["undone", "undone_by"])
        _call_result_mark(change)
        paths = ", ".join(change.paths)
        audit_record(
            action=AuditAction.UNDO,
            actor=actor,
            project=change.project_id,
            obj=change,
            object_repr=f"{change.tool}: {paths}",
            details={"tool": change.tool, "origin": change.origin, "paths": paths[:200]},
        )


def _call_result_mark(change: FileChange) -> None:
    """(Blocking) Record on the result of the call that made `change` which paths its undo
    put back: the conversation keeps the call's result as it came, and the model would
    otherwise go on believing the files hold what the call wrote."""
    if change.conversation_id is None or not change.tool_call_id:
        return  # a person's change: no call in any conversation
    asked = Message.objects.filter(pk=change.message_id).values("branch", "position").first()
    if asked is None:
        return  # the reply that made the call is gone, and its results with it
    # Ids are unique along one path only: a provider that numbers calls per response
    # ("call_0" each time) gives another branch's call the same id. The result is the
    # first with the id after the reply, on the reply's branch (forks start at a user
    # message, so a reply and its results share one).
    result = (
        Message.objects.filter(
            conversation_id=change.conversation_id,
            branch=asked["branch"],
            position__gt=asked["position"],
            role=Message.Role.TOOL,
            tool_call_id=change.tool_call_id,
        )
        .order_by("position")
        .first()
    )
    if result is not None:
        result.extra = {**(result.extra or {}), "undone": list(change.paths)}
        result.save(update_fields=["extra"])


async def changes_undo(
    *, changes: list[FileChange], user, actor: AuditActor | None = None
) -> list[FileChange]:
    """Undo several changes, newest first, stopping at the first that cannot be undone;
    each change undone is one audit entry."""
    done = []
    for change in sorted(changes, key=lambda c: (c.created, c.pk), reverse=True):
        with contextlib.suppress(UndoneAlready):
            done.append(await change_undo(change=change, user=user, actor=actor))
    return done
