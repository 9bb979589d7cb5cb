"""Where a project keeps things on disk, in one place: its root, its undo copies, its lock.

ROJO_STORAGE_DIR/<project_id>/ holds `root/` (the project's files, all a rojo can reach),
`undo/<key>/` (the copies an undo restores, outside the root) and `changes.lock`.
"""

import shutil
from pathlib import Path

from django.conf import settings


def project_dir(project_id: int) -> Path:
    """Everything one project keeps on disk is under this directory."""
    return Path(settings.ROJO_STORAGE_DIR) / str(int(project_id))


def project_root(project_id: int) -> Path:
    """Where a project's files live: ROJO_STORAGE_DIR/<project_id>/root."""
    return project_dir(project_id) / "root"


def undo_dir(project_id: int, key: str) -> Path:
    """Where the copies of one change's snapshot are kept, outside the project root."""
    return project_dir(project_id) / "undo" / key


def change_lock_path(project_id: int) -> Path:
    """The file whose flock lets one change or undo at a time run on the project."""
    return project_dir(project_id) / "changes.lock"


def project_root_create(project_id: int) -> Path:
    """Create the project's root directory (idempotent) and return it."""
    root = project_root(project_id)
    root.mkdir(parents=True, exist_ok=True)
    return root


def project_storage_remove(project_id: int) -> None:
    """Remove everything a deleted project kept on disk: its files and its undo copies."""
    shutil.rmtree(project_dir(project_id), ignore_errors=True)
