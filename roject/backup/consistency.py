"""What keeps a backup taken while the app runs consistent: the change locks and a snapshot.

A file change (a rojo's call, a person's edit or upload, an undo, a repair) runs under its
project's change lock, and stores its record (with the undo copy's key) before it lets the
lock go. So with every project's lock held, the storage does not move, and a database
snapshot taken then holds exactly the records of the files on disk. The backup takes the
locks (in project order), opens the snapshot, copies the storage, lets the locks go, and
reads the rows from the snapshot: changes wait only while the storage is copied.

A deletion's files (a conversation's kept results, images and PDFs; a deleted project's
storage) are removed under the project's change lock too, after its commit, on a thread of
their own when a backup holds the lock (roject.storage.removal_when_unlocked): the archive
then has them beside the rows its snapshot still holds.

Nothing else needs to pause: a turn's start is one transaction (the snapshot has it whole or
not at all), and a streaming reply's text is stored as it grows (a draft), so the snapshot
holds it as of then; a restore ends such a turn as interrupted (ROJO_RESTORE_HOOKS).

The snapshot: PostgreSQL's REPEATABLE READ, read only; SQLite's read transaction (a plain
BEGIN: the app's own transactions are IMMEDIATE, a writer's lock, which a reader must not
take), which WAL lets writers go on beside.
"""

import contextlib
import fcntl
import os
from collections.abc import Iterator

from django.db.backends.base.base import BaseDatabaseWrapper

from roject.storage import change_lock_open


@contextlib.contextmanager
def read_snapshot(connection: BaseDatabaseWrapper) -> Iterator[None]:
    """A transaction whose reads all see the database as of its first one."""
    connection.ensure_connection()
    if connection.vendor == "postgresql":
        connection.set_autocommit(False)
        try:
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            yield
        finally:
            connection.rollback()
            connection.set_autocommit(True)
    elif connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute("BEGIN DEFERRED")
        try:
            yield
        finally:
            with connection.cursor() as cursor:
                cursor.execute("ROLLBACK")
    else:
        raise NotImplementedError(f"no read snapshot on {connection.vendor}")


class ChangeLocks:
    """The change locks of some projects, held until `release` (blocking: this runs in a
    command's process, where a thread may wait)."""

    def __init__(self) -> None:
        self._held: dict[int, int] = {}

    def hold(self, project_ids: set[int]) -> None:
        """Take the locks of `project_ids` not held yet, in id order."""
        for project_id in sorted(project_ids - self._held.keys()):
            fd = change_lock_open(project_id)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
            except BaseException:
                os.close(fd)
                raise
            self._held[project_id] = fd

    def held(self) -> set[int]:
        return set(self._held)

    def release(self) -> None:
        while self._held:
            _, fd = self._held.popitem()
            os.close(fd)  # releases the lock
