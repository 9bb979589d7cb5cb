"""A restore killed during its swap, settled by whether its commit happened.

A restore renames the projects' storage into place just before its database commit
(roject.storage.staging), with the renames written down first and an audit entry naming the
restore's token among its rows. Killed between the two (SIGKILL, a lost machine), it leaves
either the old rows with the archive's files, or the archive's rows with what it set aside
still beside them. Its audit entry tells which: committed, the swap is finished; not, every
project is put back as it was. The start-up sweep, `manage.py storage_cleanup` and the next
restore settle it, before anything else touches the storage.
"""

import threading

from django.db import connections

from roject import storage
from roject.models import AuditAction, AuditEntry

# What the audit entry of a restore names: its token is the entry's object id.
RESTORE_OBJECT = "backup"


def restore_committed(token: str) -> bool:
    """(Blocking) Whether the restore of `token` committed: its audit entry is there."""
    entries = AuditEntry.objects.filter(action=AuditAction.BACKUP_RESTORED)
    return entries.filter(object_type=RESTORE_OBJECT, object_id=token).exists()


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
