"""Backups of a whole installation: the database as portable rows and every project's storage, in
one checked archive; restored into an empty installation of either database.

`backup_write` (dump.py) takes one while the app runs (consistency.py), `backup_verify` and
`backup_restore` (load.py) check and restore one. The archive's layout is archive.py's (its
reading reading.py's), what it says of itself manifest.py's, the rows' encoding tables.py's;
the storage's entries are read and put back by the storage gate (roject/storage/backups.py,
roject/storage/staging.py).
Nothing here knows the apps' models by name: what an app must do after a restore is a hook of
its own (ROJO_RESTORE_HOOKS), so roject imports nothing of rojos.
"""

from .dump import backup_stream, backup_write
from .errors import ArchiveExists, BackupError, NotAnArchive
from .load import Checked, Restored, backup_restore, backup_verify
from .manifest import Manifest

__all__ = [
    "ArchiveExists",
    "BackupError",
    "Checked",
    "Manifest",
    "NotAnArchive",
    "Restored",
    "backup_restore",
    "backup_stream",
    "backup_verify",
    "backup_write",
]
