"""The staging directories of restores killed before their end (SIGKILL, a lost machine):
a copy of an archive's storage beside the projects, removed once no restore holds its lock
(roject.storage.staging: the restore holds an flock on STAGING_LOCK while it runs, taken
before the file has that name), whatever process runs the restore; a directory with no
lock is none (a project's storage a restore set aside, or a staging being made) and stays.
The start-up sweep and `manage.py storage_cleanup` call this (leftovers).
"""

import contextlib
import errno
import fcntl
import os

from django.conf import settings

from .entries import entry_remove
from .paths import is_temp_file
from .staging import STAGING_LOCK

_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def staging_leftovers_remove(*, dry_run: bool = False) -> list[str]:
    """(Blocking) Remove the staging directories of restores no longer running (killed);
    returns them (or, `dry_run`, what would be removed), as paths under ROJO_STORAGE_DIR."""
    try:
        base = os.open(settings.ROJO_STORAGE_DIR, _DIRECTORY)
    except FileNotFoundError:
        return []
    try:
        return [
            name
            for name in sorted(os.listdir(base))
            if is_temp_file(name) and _staging_left(base, name, remove=not dry_run)
        ]
    finally:
        os.close(base)


def _staging_left(base: int, name: str, *, remove: bool) -> bool:
    """Whether `name` is a staging directory no restore holds (removed, `remove`). A
    directory with no lock is none: a project's storage a restore set aside, or a staging
    directory being made."""
    try:
        directory = os.open(name, _DIRECTORY, dir_fd=base)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):  # gone, a file, a link
            return False
        raise
    try:
        lock = os.open(STAGING_LOCK, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=directory)
    except FileNotFoundError:
        os.close(directory)
        return False
    try:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # its restore is running
            return False
        if remove:
            for entry in os.listdir(directory):
                with contextlib.suppress(FileNotFoundError):
                    entry_remove(directory, entry)
            with contextlib.suppress(FileNotFoundError):
                os.rmdir(name, dir_fd=base)
        return True
    finally:
        os.close(lock)
        os.close(directory)
