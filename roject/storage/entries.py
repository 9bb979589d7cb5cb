"""Small operations on one directory entry (a file, a directory or a link, never followed)."""

import contextlib
import os
import shutil
import uuid
from pathlib import Path

from .paths import TEMP_PREFIX, TEMP_SUFFIX, resolve_entry


def is_present(path: Path) -> bool:
    """Whether an entry is there; a broken link counts, which `Path.exists()` misses."""
    return path.exists() or path.is_symlink()


def is_real_directory(path: Path) -> bool:
    """A directory, not a link to one: what a copy or a removal has to walk."""
    return path.is_dir() and not path.is_symlink()


def entry_exists(project_root: Path, relative_path: str) -> bool:
    """Whether something (even a broken link) is at the path; PathError if it is not allowed."""
    return is_present(resolve_entry(project_root, relative_path))


def entry_copy(source: Path, target: Path) -> None:
    """Copy a file, a link (as a link) or a whole tree (its links as links) to `target`."""
    if source.is_symlink() or source.is_file():
        shutil.copy2(source, target, follow_symlinks=False)
    else:
        shutil.copytree(source, target, symlinks=True)


def entry_remove(path: Path) -> None:
    """Remove a file, a link (not what it points to) or a whole tree."""
    if path.is_symlink() or not path.is_dir():
        path.unlink()
    else:
        shutil.rmtree(path)


def temp_beside(path: Path) -> Path:
    """An unused temporary name next to `path`, of the kind listings leave out (is_temp_file)."""
    return path.parent / f"{TEMP_PREFIX}{uuid.uuid4().hex}{TEMP_SUFFIX}"


def fsync_dir(directory: Path) -> None:
    """Make a rename durable; some filesystems do not support it, which is fine."""
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
