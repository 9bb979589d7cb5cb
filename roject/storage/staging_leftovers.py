"""The staging directories of restores killed before their end (SIGKILL, a lost machine):
a copy of an archive's storage beside the projects, removed once no restore holds its lock
(roject.storage.staging: the restore holds an flock on STAGING_LOCK while it runs, taken
before the file has that name), whatever process runs the restore; a directory with no
lock is none (a project's storage a restore set aside, or a staging being made) and stays.
One killed during its swap is settled first by its journal (roject.storage.staging). The
start-up sweep and `manage.py storage_cleanup` call this (leftovers), told by the backup
package whether a journal's restore committed (roject.backup.interrupted).
"""

import contextlib
import errno
import fcntl
import json
import logging
import os
from collections.abc import Callable

from django.conf import settings

from .entries import entry_remove, fsync_dir, temp_name
from .paths import is_temp_file
from .staging import STAGING_LOCK, SWAP_JOURNAL

logger = logging.getLogger(__name__)

_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def staging_leftovers_remove(
    *, dry_run: bool = False, committed: Callable[[str], bool] | None = None
) -> list[str]:
    """(Blocking) Remove the staging directories of restores no longer running (killed);
    returns them (or, `dry_run`, what would be removed), as paths under ROJO_STORAGE_DIR.

    One killed during its swap (its SWAP_JOURNAL there) is settled first, if `committed`
    tells whether the restore of a journal's token committed (the database knows: the
    storage gate does not ask it): the swap finished (what it set aside removed) or undone
    (every project put back as it was); without `committed` it stays for a caller that can."""
    try:
        base = os.open(settings.ROJO_STORAGE_DIR, _DIRECTORY)
    except FileNotFoundError:
        return []
    try:
        return [
            name
            for name in sorted(os.listdir(base))
            if is_temp_file(name)
            and _staging_left(base, name, remove=not dry_run, committed=committed)
        ]
    finally:
        os.close(base)


def _staging_left(
    base: int, name: str, *, remove: bool, committed: Callable[[str], bool] | None
) -> bool:
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
        try:
            journal = _journal_read(directory)
        except ValueError:  # written whole by a rename: not ours to guess at; left as it is
            logger.warning("the journal of the restore left in %s cannot be read", name)
            return False
        if journal is not None and committed is None:
            return False  # a swap to settle: only by one who knows whether it committed
        if journal is not None and remove:
            try:
                done = committed(str(journal["token"]))
            except Exception:  # not known now (the database out of reach): settled later
                logger.warning("whether the restore left in %s committed is not known", name)
                return False
            _swap_settle(base, directory, journal, committed=done)
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


def _journal_read(directory: int) -> dict | None:
    try:
        fd = os.open(SWAP_JOURNAL, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=directory)
    except FileNotFoundError:
        return None
    with os.fdopen(fd, "rb") as journal:
        return json.load(journal)


def _swap_settle(base: int, directory: int, journal: dict, *, committed: bool) -> None:
    """Finish a killed restore's swap (its commit happened: remove what it set aside) or
    undo it (put each project back as it was), whichever renames it had made. Each step
    looks at what is there, so a settling cut short is settled again the same way."""
    moves = journal["moves"]
    if committed:  # every rename was made before the commit
        for _, aside, _ in moves:
            if aside is not None and _there(base, aside):
                entry_remove(base, aside)
        return
    for name, aside, staged in reversed(moves):
        if aside is not None and _there(base, aside):
            if _there(base, name):  # the archive's copy, renamed in after the aside
                os.rename(name, temp_name(), src_dir_fd=base, dst_dir_fd=directory)
            os.rename(aside, name, src_dir_fd=base, dst_dir_fd=base)
        elif aside is None and staged and _there(base, name) and not _there(directory, name):
            os.rename(name, name, src_dir_fd=base, dst_dir_fd=directory)  # nothing was there
    fsync_dir(base)


def _there(directory: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=directory, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True
