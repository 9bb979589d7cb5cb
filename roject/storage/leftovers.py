"""What crashes leave on the storage, found and removed: partial snapshots, temporary files.

A process killed while it took an undo snapshot leaves its staging directory in undo/ (a
temporary name: a snapshot is renamed to its key only once complete); one killed while it
wrote a file leaves the temporary file beside its target; one killed during a re-run leaves
its scratch copy in the system's temporary directory. None of them is ever read as data,
but they hold space a full disk needs. An upload or unpack cut off (a killed process, a
bug) leaves its file or directory in incoming/; those older than INCOMING_SECONDS are
removed too (a live one is written to, or moved in, well within that), and so are the
temporary files of images and PDFs a message attaches whose write was cut off (`kept`: those
writes take no lock, so age tells). Tool results kept
for read_result older than ROJO_KEPT_RESULT_DAYS go as well (roject.storage.results).

A server process, as it starts, sweeps every project on a thread of its own (undo/,
incoming/ and the temporary files anywhere in the root; roject.backup.interrupted's
`storage_sweep_soon`, a start-up hook); a project busy then is cleaned the first time the
process uses it (a listing of undo/; the root is not walked then). `manage.py
storage_cleanup` does what the sweep does, and also removes the complete snapshots no change
record names and the scratch copies.
All run under the project's change lock, taken without waiting: every snapshot and write
runs under it, so nothing removed can be in use, and a project busy now is cleaned
another time. A rojo can make a file of a temporary name, and directories and links, in the
root: the walk removes each temporary file by name in the directory it holds open, never by
a path looked up again, which a directory swapped for a link would lead outside.

Both also remove the staging directories that restores killed before their end left beside
the projects (a copy of an archive's storage): one whose lock no restore holds (`backups`).
"""

import contextlib
import fcntl
import logging
import os
import shutil
import stat
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from django.conf import settings

from .entries import entry_remove
from .kept import kept_partials
from .layout import project_dir, project_root
from .locks import change_lock_open
from .paths import StorageError, is_temp_file
from .results import results_old
from .staging_leftovers import staging_leftovers_remove

SCRATCH_PREFIX = "rojo-rerun-"
# An upload or unpacked archive under incoming/ untouched this long is a leftover.
INCOMING_SECONDS = 3600
# A snapshot no record names is left alone this long: its record may be being stored now.
UNRECORDED_SECONDS = 3600
_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC

_cleaned: set[int] = set()  # projects this process has cleaned since it started

logger = logging.getLogger(__name__)


def storage_sweep(*, committed: Callable[[str], bool] | None = None) -> int:
    """(Blocking) Remove the staging directories of killed restores (settling the swap of
    one killed during it, with `committed`: staging_leftovers) and every project's partial
    snapshots, old incoming/ leftovers and temporary files, each project under its change
    lock; a project changing files now is left to its first use. Returns how many entries
    were removed."""
    removed = 0
    try:
        removed += len(staging_leftovers_remove(committed=committed))
    except OSError:  # best effort: the command says what is in the way
        logger.warning("could not remove what killed restores left", exc_info=True)
    try:
        projects = storage_project_ids()
    except OSError:
        logger.warning("could not list the storage to sweep it", exc_info=True)
        return removed
    for project_id in projects:
        try:
            found = project_leftovers_remove(project_id, whole_root=True)
        except (OSError, StorageError):  # best effort, off the request path (a full disk: its
            # change lock not made): its first use and the command
            logger.warning("could not sweep project %s of crash leftovers", project_id)
            continue
        if found is not None:
            _cleaned.add(project_id)
            removed += len(found)
    if removed:
        logger.warning("removed %s entries that crashes left on the storage", removed)
    return removed


def project_first_use(project_id: int) -> None:
    """Clean the project's undo/ of partial snapshots, once per process (cheap after)."""
    if project_id in _cleaned:
        return
    incoming_leftovers_remove(project_id)
    if not (project_dir(project_id) / "undo").is_dir():
        _cleaned.add(project_id)
        return
    if project_leftovers_remove(project_id, whole_root=False) is not None:
        _cleaned.add(project_id)


def project_leftovers_remove(
    project_id: int,
    *,
    whole_root: bool,
    recorded: set[str] | None = None,
    dry_run: bool = False,
) -> list[str] | None:
    """Remove the project's partial snapshots (and, `whole_root`, its temporary files).

    `recorded`: the keys of the snapshots that change records still need (not undone); the
    complete snapshots of other keys, older than UNRECORDED_SECONDS, are removed too (a
    crash between taking a snapshot and storing its record, between deleting a record and
    its copies, or between marking an undo and discarding its copy, leaves one that no undo
    can reach). Returns what was (or, `dry_run`, would be) removed, as
    paths under ROJO_STORAGE_DIR; None when the project's change lock is held (a change is
    running: try again later).
    """
    fd = change_lock_open(project_id)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return None
        found = _undo_partials(project_id) + _incoming_old(project_id)
        found += kept_partials(project_id=project_id, older_than=time.time() - INCOMING_SECONDS)
        found += results_old(project_id)
        if recorded is not None:
            found += _unrecorded(project_id, recorded)
        if not dry_run:
            for path in found:
                _remove(path)
        if whole_root:
            found += _root_temp_files(project_root(project_id), remove=not dry_run)
        base = Path(settings.ROJO_STORAGE_DIR)
        return [str(path.relative_to(base)) for path in found]
    finally:
        os.close(fd)  # releases the lock


def _undo_partials(project_id: int) -> list[Path]:
    undo = project_dir(project_id) / "undo"
    try:
        with os.scandir(undo) as scan:
            return sorted(Path(entry.path) for entry in scan if is_temp_file(entry.name))
    except FileNotFoundError:
        return []


def incoming_leftovers_remove(project_id: int) -> list[Path]:
    """Remove what cut-off uploads and unpacks left in incoming/ over INCOMING_SECONDS ago."""
    found = _incoming_old(project_id)
    for path in found:
        _remove(path)
    return found


def _incoming_old(project_id: int) -> list[Path]:
    incoming = project_dir(project_id) / "incoming"
    old = time.time() - INCOMING_SECONDS
    try:
        with os.scandir(incoming) as scan:
            return sorted(
                Path(entry.path)
                for entry in scan
                if entry.stat(follow_symlinks=False).st_mtime < old
            )
    except FileNotFoundError:
        return []


def _unrecorded(project_id: int, recorded: set[str]) -> list[Path]:
    undo = project_dir(project_id) / "undo"
    old = time.time() - UNRECORDED_SECONDS
    try:
        with os.scandir(undo) as scan:
            return sorted(
                Path(entry.path)
                for entry in scan
                if not is_temp_file(entry.name)
                and entry.name not in recorded
                and entry.stat(follow_symlinks=False).st_mtime < old
            )
    except FileNotFoundError:
        return []


def _root_temp_files(root: Path, *, remove: bool) -> list[Path]:
    """The temporary files of writes cut off anywhere in the root, removed (`remove`) as
    the walk finds them: by name in the directory it holds open, so a directory swapped for
    a link meanwhile (a rojo can make both) cannot take the removal outside. The walk
    follows no link."""
    if not root.is_dir():
        return []
    found = []
    for dirpath, _, filenames, dir_fd in os.fwalk(root):
        for name in filenames:
            if not is_temp_file(name):
                continue
            try:
                st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
                if not stat.S_ISREG(st.st_mode):
                    continue
                if remove:
                    os.unlink(name, dir_fd=dir_fd)
            except FileNotFoundError:  # gone meanwhile
                continue
            found.append(Path(dirpath) / name)
    return sorted(found)


def _remove(path: Path) -> None:
    """Remove an entry beside the root (in undo/, incoming/, images/…): its directory opened
    without following a link, the entry removed by name in it, a tree walked by descriptors."""
    try:
        dir_fd = os.open(path.parent, _DIRECTORY)
    except (FileNotFoundError, NotADirectoryError):
        return
    try:
        with contextlib.suppress(FileNotFoundError):
            entry_remove(dir_fd, path.name)
    finally:
        os.close(dir_fd)


def scratch_dir_make() -> Path:
    """A new scratch directory for a re-run, named with this process's id."""
    return Path(tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-"))


def scratch_leftovers_remove(*, dry_run: bool = False) -> list[str]:
    """Remove the scratch copies of re-runs whose process is gone; returns their paths."""
    found = []
    temp = Path(tempfile.gettempdir())
    for path in sorted(temp.glob(f"{SCRATCH_PREFIX}*")):
        pid = path.name.removeprefix(SCRATCH_PREFIX).split("-", 1)[0]
        if path.is_dir() and not path.is_symlink() and pid.isdigit() and not _alive(int(pid)):
            found.append(path)
            if not dry_run:
                shutil.rmtree(path, ignore_errors=True)
    return [str(path) for path in found]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    return True


def storage_project_ids() -> list[int]:
    """The projects that have a directory under ROJO_STORAGE_DIR."""
    base = Path(settings.ROJO_STORAGE_DIR)
    if not base.is_dir():
        return []
    return sorted(int(p.name) for p in base.iterdir() if p.name.isdigit() and p.is_dir())
