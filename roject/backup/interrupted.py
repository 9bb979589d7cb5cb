"""A restore killed during its swap, settled by whether its commit happened.

A restore renames the projects' storage into place just before its database commit
(roject.storage.staging), with the renames written down first and an audit entry naming the
restore's token among its rows. Killed between the two (SIGKILL, a lost machine), it leaves
either the old rows with the archive's files, or the archive's rows with what it set aside
still beside them. Its audit entry tells which: committed, the swap is finished; not, every
project is put back as it was. The start-up sweep, `manage.py storage_cleanup` and the next
restore settle it, before anything else touches the storage.
"""

import hashlib
import threading

from django.db import DEFAULT_DB_ALIAS, connections

from roject import storage
from roject.models import AuditAction, AuditEntry

# What the audit entry of a restore names: its token is the entry's object id.
RESTORE_OBJECT = "backup"


def restore_marked(*, token: str, using: str) -> None:
    """(Blocking, first in the restore's transaction) On PostgreSQL, an advisory lock of the
    restore's token, held until its transaction ends: a restore killed after it sent its
    COMMIT leaves the server finishing that commit, and `restore_committed` waits for it
    rather than read the log before the commit lands. (SQLite's commit is the process's own:
    killed, its journal undoes it when the database is next opened.)"""
    connection = connections[using]
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_lock_key(token)])


def restore_committed(token: str) -> bool:
    """(Blocking) Whether the restore of `token` committed: its audit entry is there, once
    its transaction, if the server still runs it, has ended (`restore_marked`)."""
    connection = connections[DEFAULT_DB_ALIAS]
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_lock(%s)", [_lock_key(token)])
            cursor.execute("SELECT pg_advisory_unlock(%s)", [_lock_key(token)])
    entries = AuditEntry.objects.filter(action=AuditAction.BACKUP_RESTORED)
    return entries.filter(object_type=RESTORE_OBJECT, object_id=token).exists()


def _lock_key(token: str) -> int:
    """The advisory lock's key for a restore's token: 64 bits of its digest, signed."""
    return int.from_bytes(hashlib.sha256(token.encode()).digest()[:8], "big", signed=True)


def restores_settled(*, dry_run: bool = False) -> list[str]:
    """(Blocking) Settle and remove what killed restores left (staging_leftovers_remove);
    the paths, as storage_cleanup prints them."""
    return storage.staging_leftovers_remove(dry_run=dry_run, committed=restore_committed)


def storage_sweep_soon() -> None:
    """Sweep the storage of what crashes left, a killed restore's swap settled first, on a
    thread of its own (the server starts meanwhile): a start-up hook (ROJO_STARTUP_HOOKS)."""
    threading.Thread(target=_sweep, name="storage-sweep", daemon=True).start()


def _sweep() -> None:
    try:
        storage.storage_sweep(committed=restore_committed)
    finally:
        connections.close_all()  # this thread's, asked whether a restore committed
