"""The per-project change lock: one recorded change or undo at a time, in every process."""

import asyncio
import contextlib
import fcntl
import logging
import os
import threading
from collections.abc import AsyncIterator, Callable
from typing import TypeVar

from asgiref.sync import sync_to_async

from .layout import change_lock_path, directory_make
from .paths import disk_full, no_room

T = TypeVar("T")
logger = logging.getLogger(__name__)

# How often a change waiting for the project's change lock tries again.
_LOCK_POLL_SECONDS = 0.02


def change_lock_open(project_id: int) -> int:
    """(Blocking) Open the project's lock file, made on first use; returns its descriptor."""
    path = change_lock_path(project_id)
    directory_make(path.parent)
    # 0600 whatever the umask (which only takes bits away).
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        if no_room(exc):  # made on a project's first change: no room for its inode
            raise disk_full("the project's change lock") from exc
        raise


def _lock_then(project_id: int, then: Callable[[], T] | None) -> tuple[int, bool, T | None]:
    """(Blocking) Open the lock file and try the lock; once held, run `then`.

    Returns the descriptor, whether the lock is held, and what `then` returned.
    """
    fd = change_lock_open(project_id)
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


def removal_when_unlocked(project_id: int, remove: Callable[[], None]) -> None:
    """(Blocking, briefly) Run `remove`, a removal of files a deletion left unused (the file
    system only, no ORM), holding the project's change lock: at once when it is free, else
    on a thread of its own once it is.

    A backup holds every project's change lock while it copies the storage, its database
    snapshot already taken: a conversation's kept files or a deleted project's storage
    removed meanwhile would leave the archive with rows whose files it lacks. The deletion
    itself does not wait for the backup (nor hold a database thread): its files go after it.
    """
    fd, held, _ = _lock_then(project_id, remove)
    if held:
        os.close(fd)  # releases the lock
        return
    threading.Thread(
        target=_removal_once_locked, args=(fd, remove), name="removal-when-unlocked", daemon=True
    ).start()


def _removal_once_locked(fd: int, remove: Callable[[], None]) -> None:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        remove()
    except Exception:  # left for the storage's own sweeps; nothing else is waiting on it
        logger.exception("a removal waiting for its project's change lock failed")
    finally:
        os.close(fd)
