"""Where a project keeps things on disk, in one place: its root, its undo copies, its lock.

ROJO_STORAGE_DIR/<project_id>/ holds `root/` (the project's files, all a rojo can reach),
`undo/<key>/` (the copies an undo restores, outside the root; a snapshot being made has a
temporary name there until it is complete) and `changes.lock`. Their modes
do not depend on the server's umask: the directories down to the root are 0755 like every
directory in it, the undo copies are kept in 0700 directories, the lock file is 0600.
"""

import os
import re
import shutil
from pathlib import Path

from django.conf import settings

from .beneath import DIRECTORY_MODE
from .entries import temp_name
from .paths import PathError, disk_full, no_room

UNDO_MODE = 0o700
_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_UNDO_KEY = re.compile(r"[0-9a-f]{32}")  # uuid4().hex, as snapshots.snapshot_take names them


def project_dir(project_id: int) -> Path:
    """Everything one project keeps on disk is under this directory."""
    return Path(settings.ROJO_STORAGE_DIR) / str(int(project_id))


def project_root(project_id: int) -> Path:
    """Where a project's files live: ROJO_STORAGE_DIR/<project_id>/root."""
    return project_dir(project_id) / "root"


def undo_dir(project_id: int, key: str) -> Path:
    """Where the copies of one change's snapshot are kept, outside the project root.
    PathError for a key that is not one a snapshot makes (32 hex digits: a restored row
    naming `../../elsewhere` made an undo copy that in, then delete it)."""
    if not _UNDO_KEY.fullmatch(key):
        raise PathError("the change's undo copies are not where a change keeps them")
    return project_dir(project_id) / "undo" / key


def incoming_dir_create(project_id: int) -> Path:
    """Where uploads land before they are checked and moved in: beside the root, not in it
    (0700), on the same file system, so moving one in is a rename."""
    directory = project_dir(project_id) / "incoming"
    directory_make(directory.parent)
    directory_make(directory, UNDO_MODE)
    return directory


def change_lock_path(project_id: int) -> Path:
    """The file whose flock lets one change or undo at a time run on the project."""
    return project_dir(project_id) / "changes.lock"


def directory_make(path: Path, mode: int = DIRECTORY_MODE) -> None:
    """Make a directory and its missing parents with `mode`, whatever the umask (idempotent).
    DiskFull, naming no server path, when the storage has no room for one (a project's first
    use: its root, its incoming/, its lock's directory)."""
    missing = []
    while not path.is_dir():
        missing.append(path)
        path = path.parent
    for directory in reversed(missing):
        try:
            os.mkdir(directory, mode)
        except FileExistsError:
            continue  # made meanwhile, by another process
        except OSError as exc:
            if no_room(exc):
                raise disk_full("the project's storage") from exc
            raise
        os.chmod(directory, mode)


def project_root_create(project_id: int) -> Path:
    """Create the project's root directory (idempotent) and return it.

    The first call for a project in a process also removes what a crash left in its undo/
    (leftovers.project_first_use; a set lookup on later calls).
    """
    from .leftovers import project_first_use  # it uses this module

    root = project_root(project_id)
    if not root.is_dir():
        directory_make(root)
    project_first_use(project_id)
    return root


def undo_staging_create(project_id: int) -> tuple[Path, int]:
    """Make a directory for a snapshot's copies while they are made (0700, in a 0700 undo/),
    under a temporary name (is_temp_file) that the clean-up after a crash knows; returns it
    and its open descriptor."""
    undo = project_dir(project_id) / "undo"
    directory_make(undo.parent)
    directory_make(undo, UNDO_MODE)
    staging = undo / temp_name()
    os.mkdir(staging, UNDO_MODE)
    try:
        os.chmod(staging, UNDO_MODE)
        return staging, os.open(staging, _DIRECTORY)
    except BaseException:
        os.rmdir(staging)
        raise


def project_storage_remove(project_id: int) -> None:
    """Remove everything a deleted project kept on disk: its files and its undo copies."""
    shutil.rmtree(project_dir(project_id), ignore_errors=True)
