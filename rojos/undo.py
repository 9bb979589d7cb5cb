"""Undo for anything a rojo changed: snapshots before a change, and restoring them after.

A snapshot copies the previous state of each changed path to ROJO_STORAGE_DIR/<project>/undo/
<key>/<n>, outside the project root, with the list of parent directories that did not exist
yet (a call creates them on the way; undo removes them again when they are empty). After the
change, a digest of each path is recorded; an undo restores the snapshot only while every path
still has that digest, so newer work made since (by a person or a later call) is never
overwritten.
"""

import asyncio
import contextlib
import fcntl
import hashlib
import logging
import os
import shutil
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TypeVar

from asgiref.sync import sync_to_async
from django.conf import settings
from django.utils import timezone

from roject.storage import StorageError, reported, resolve_entry

from .models import Conversation, FileChange

logger = logging.getLogger(__name__)
T = TypeVar("T")

# How often a change waiting for the project's change lock tries again.
_LOCK_POLL_SECONDS = 0.02


class UndoRefused(StorageError):
    """The change cannot be undone (the files changed since, or it was undone already)."""


class UndoneAlready(UndoRefused):
    """Another request undid the change first (a double click, two tabs)."""


def undo_dir(project_id: int, key: str) -> Path:
    return Path(settings.ROJO_STORAGE_DIR) / str(int(project_id)) / "undo" / key


def _lock_file_open(project_id: int) -> int:
    path = Path(settings.ROJO_STORAGE_DIR) / str(int(project_id)) / "changes.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    return os.open(path, os.O_RDWR | os.O_CREAT, 0o600)


def _lock_then(project_id: int, then: Callable[[], T] | None) -> tuple[int, bool, T | None]:
    """(Blocking) Open the lock file and try the lock; once held, run `then`.

    Returns the descriptor, whether the lock is held, and what `then` returned.
    """
    fd = _lock_file_open(project_id)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return fd, False, None
    except BaseException:
        os.close(fd)
        raise
    try:
        return fd, True, then() if then is not None else None
    except BaseException:
        os.close(fd)  # releases the lock
        raise


@contextlib.asynccontextmanager
async def changes_locked(
    project_id: int, then: Callable[[], T] | None = None
) -> AsyncIterator[T | None]:
    """One recorded change or undo at a time per project, in every process sharing the storage.

    Another call's change landing between a snapshot and the digest taken after would end up
    in this call's undo record, and an undo would then restore the wrong state. The lock is
    an flock on a file next to the project's root, tried without blocking so that no thread
    waits on it. `then`, a blocking function (it may use the ORM), runs once the lock is
    held; when the lock is free, in the same trip to the database thread as taking it. The
    block gets what it returns.
    """
    trying = asyncio.ensure_future(sync_to_async(_lock_then)(project_id, then))
    try:
        fd, held, value = await asyncio.shield(trying)
    except asyncio.CancelledError:
        with contextlib.suppress(Exception):  # the lock may be held by now: let it go
            os.close((await trying)[0])
        raise
    try:
        if not held:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    await asyncio.sleep(_LOCK_POLL_SECONDS)
            if then is not None:
                value = await sync_to_async(then)()
        yield value
    finally:
        os.close(fd)  # releases the lock


async def under_changes_lock(project_id: int, work: Callable[[], T]) -> T:
    """Run `work`, a blocking function (it may use the ORM), holding the change lock."""
    async with changes_locked(project_id, then=work) as value:
        return value


def _exists(path: Path) -> bool:
    return path.exists() or path.is_symlink()


def digest(path: Path) -> str | None:
    """A fingerprint of a file, link or directory tree as it is now; None when absent."""
    if path.is_symlink():
        return "link:" + os.readlink(path)
    if not path.exists():
        return None
    hasher = hashlib.sha256()
    if path.is_file():
        with path.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 16), b""):
                hasher.update(block)
        return "file:" + hasher.hexdigest()
    for dirpath, dirnames, filenames in os.walk(path):
        dirnames.sort()
        for name in sorted(filenames) + dirnames:
            entry = Path(dirpath) / name
            hasher.update(str(entry.relative_to(path)).encode() + b"\0")
            hasher.update(
                (digest(entry) if entry.is_file() or entry.is_symlink() else "d").encode()
            )
    return "dir:" + hasher.hexdigest()


def _copy(source: Path, target: Path) -> None:
    if source.is_symlink() or source.is_file():
        shutil.copy2(source, target, follow_symlinks=False)
    else:
        shutil.copytree(source, target, symlinks=True)


def _remove(path: Path) -> None:
    if path.is_symlink() or not path.is_dir():
        path.unlink()
    else:
        shutil.rmtree(path)


@dataclass
class Snapshot:
    """The state of some paths before a call, kept until the call's change is recorded."""

    key: str
    paths: list[str]
    existed: list[bool]
    directory: Path
    # Parent directories that did not exist: the call creates them, an undo removes them.
    missing_parents: list[str]


def _missing_parents(root: Path, relative: str) -> list[str]:
    """The parent directories of a path that do not exist (yet), deepest first."""
    missing = []
    for parent in PurePosixPath(relative.rstrip("/")).parents:
        if str(parent) == "." or _exists(resolve_entry(root, str(parent))):
            break
        missing.append(str(parent))
    return missing


def snapshot_take(project_id: int, root: Path, paths: list[str]) -> Snapshot:
    """Copy the current state of `paths` aside (blocking)."""
    key = uuid.uuid4().hex
    # Made only when there is something to copy: a call that creates a path needs none (undo
    # removes it), and directory operations are slow.
    directory = undo_dir(project_id, key)
    existed, missing = [], set()
    for number, relative in enumerate(paths):
        entry = resolve_entry(root, relative)
        with reported(relative):
            present = _exists(entry)
            if present:
                directory.mkdir(parents=True, exist_ok=True)
                _copy(entry, directory / str(number))
            else:
                missing.update(_missing_parents(root, relative))
        existed.append(present)
    return Snapshot(
        key=key,
        paths=paths,
        existed=existed,
        directory=directory,
        missing_parents=sorted(missing),
    )


def digests(root: Path, paths: list[str]) -> list[str | None]:
    return [digest(resolve_entry(root, relative)) for relative in paths]


def change_finish(root: Path, change: FileChange) -> FileChange | None:
    """(Blocking) Set the record's digests of the paths as its call left them, unsaved.

    A call that changed nothing keeps no record: it is deleted (if stored), with its copies,
    and None returned. What the paths were before is read off the copies (absent: they did
    not exist).
    """
    directory = undo_dir(change.project_id, change.key)
    with reported(", ".join(change.paths)):
        before = [
            digest(directory / str(number)) if existed else None
            for number, existed in enumerate(change.before)
        ]
        after = digests(root, change.paths)
    if after == before:
        if change.pk is not None:
            change.delete()
        shutil.rmtree(directory, ignore_errors=True)
        return None
    change.after = after
    return change


def cut_off_changes_finish(root: Path, changes: list[FileChange]) -> None:
    """(Blocking) Finish the records of calls a crash cut off while they ran.

    A write is atomic, so each path is as it was before its call or as the call left it;
    either way the record can now say which, and the change is undoable like any other.
    """
    for change in changes:
        try:
            finished = change_finish(root, change)
        except StorageError:  # left unfinished; an undo of it tries again and says why
            logger.warning("could not finish the change record %s", change.pk, exc_info=True)
            continue
        if finished is not None:
            finished.save(update_fields=["after"])


def _restore(project_id: int, root: Path, change: FileChange) -> None:
    """Put every path back as the snapshot has it, if none changed since (blocking)."""
    directory = undo_dir(project_id, change.key)
    if digests(root, change.paths) != change.after:
        raise UndoRefused(
            f"{', '.join(change.paths)} changed since the rojo's {change.tool}; "
            "undo refused so that newer work is not lost"
        )
    # Remove first, then restore: a move's source and destination may swap places.
    for relative in change.paths:
        entry = resolve_entry(root, relative)
        with reported(relative):
            if _exists(entry):
                _remove(entry)
    for number, relative in enumerate(change.paths):
        if change.before[number]:
            entry = resolve_entry(root, relative)
            with reported(relative):
                entry.parent.mkdir(parents=True, exist_ok=True)
                _copy(directory / str(number), entry)
    _remove_created_parents(root, change.created_parents)
    shutil.rmtree(directory, ignore_errors=True)


def _remove_created_parents(root: Path, created: list[str]) -> None:
    """Remove the parents the call created, deepest first, if nothing else was put in them."""
    for relative in sorted(created, key=_depth, reverse=True):
        # Kept when not empty (it holds newer work) or no longer a directory inside the root.
        with contextlib.suppress(StorageError, OSError):
            entry = resolve_entry(root, relative)
            if entry.is_dir() and not entry.is_symlink():
                entry.rmdir()


def _depth(relative: str) -> int:
    return len(PurePosixPath(relative).parts)


async def change_undo(*, change: FileChange, root: Path, user) -> FileChange:
    """Undo one recorded change, or raise UndoRefused."""
    if change.undone is not None:
        raise UndoneAlready("this change was undone already")
    if await Conversation.objects.running().filter(pk=change.conversation_id).aexists():
        raise UndoRefused("a reply is still running in this conversation; undo when it is done")
    async with changes_locked(change.project_id):
        if await FileChange.objects.filter(pk=change.pk, undone__isnull=False).aexists():
            raise UndoneAlready("this change was undone already")
        if change.after is None:  # its call was cut off, and its conversation not used since
            if await sync_to_async(change_finish)(root, change) is None:
                raise UndoRefused("the call was cut off before it changed anything")
            await change.asave(update_fields=["after"])
        await asyncio.to_thread(_restore, change.project_id, root, change)
    change.undone = timezone.now()
    change.undone_by = user
    await change.asave(update_fields=["undone", "undone_by"])
    return change


async def changes_undo(*, changes: list[FileChange], root: Path, user) -> list[FileChange]:
    """Undo several changes, newest first, stopping at the first that cannot be undone."""
    done = []
    for change in sorted(changes, key=lambda c: (c.created, c.pk), reverse=True):
        with contextlib.suppress(UndoneAlready):
            done.append(await change_undo(change=change, root=root, user=user))
    return done
