"""A restore's entries put in place: the projects' storage staged, then swapped in.

A restore writes into a staging directory beside the projects (a temporary name, which no
listing of projects takes for one), each entry created anew (O_EXCL, O_NOFOLLOW) inside a
directory the same restore made, so an archive cannot reach outside it whatever its names
or links say, and with no mode the gate would not give (KEPT_MODE). Once every row is in,
just before the database's commit, the projects are renamed into place (a rename each: no
project is ever seen half restored), and renamed back if the commit fails.

The restore holds an flock on the staging directory's STAGING_LOCK from the start to the
end: a restore killed meanwhile (SIGKILL, a lost machine) leaves the directory, and the
sweep of what crashes leave removes it once it can take that lock
(staging_leftovers.staging_leftovers_remove), never while its restore runs, in whatever
process. One killed between the renames and the end of the commit also leaves the journal
of its renames (SWAP_JOURNAL), by which the swap is finished or undone, as the commit did or
did not happen.
"""

import fcntl
import json
import os
import shutil
from collections.abc import Set as AbstractSet
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from django.conf import settings

from .backups import PARTS, BackupEntryError, StoredEntry, entry_path_checked
from .entries import fsync_dir, temp_name
from .layout import directory_make

_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_BLOCK = 1 << 20
# The permission bits a restored file or directory may keep: an archive is not to be trusted
# with setuid, setgid or sticky bits, or with write access for the group or others, which
# the gate never gives (it makes 0644 and 0755): a tampered archive's setuid program would
# run as the app for any account on the host that can reach the storage, and a directory
# anyone may write into would let them plant files in a project.
KEPT_MODE = 0o755
# The file in a staging directory that says it is one, locked while its restore runs.
STAGING_LOCK = "restore.lock"
# The renames of a restore's swap, written before the first: {"token": …, "moves": [[project,
# its aside's name or null (nothing there), whether the archive's copy goes there], …]}.
SWAP_JOURNAL = "swap.json"


class StorageStaging:
    """Where a restore writes the projects' storage until the database's restore commits."""

    def __init__(self) -> None:
        self.base = Path(settings.ROJO_STORAGE_DIR)
        directory_make(self.base)
        self.directory = self.base / temp_name()
        os.mkdir(self.directory, 0o700)
        self._lock = _lock_hold(self.directory)
        self._top = os.open(self.directory, _DIRECTORY)
        # Directories this restore made (as "<project>/<path>"): an entry goes only into one.
        self._made: set[str] = set()
        self._modes: list[tuple[str, int]] = []  # directories given their mode at the end
        self._placed: list[tuple[Path, Path | None]] = []  # (project dir, what was there)
        self._parent: tuple[str, int] | None = None  # the last entry's folder, held open

    def entry_place(self, project_id: int, entry: StoredEntry, content: BinaryIO | None) -> None:
        """(Blocking) Make one entry in the staging directory, from `content` for a file."""
        relative = entry_path_checked(entry.path, entry.kind)
        project = str(int(project_id))
        parent = str(PurePosixPath(project, relative).parent)
        if parent == project and project not in self._made:
            os.mkdir(project, 0o755, dir_fd=self._top)
            os.chmod(project, 0o755, dir_fd=self._top)
            self._made.add(project)
        if parent not in self._made:
            raise BackupEntryError(f"the archive's storage entry {entry.path!r} has no folder")
        try:
            self._make(self._folder(parent), relative.name, entry, content)
        except FileExistsError as exc:
            raise BackupEntryError(f"the archive holds {entry.path!r} twice") from exc
        if entry.kind == "dir":
            self._made.add(f"{project}/{relative}")
            if entry.mode & KEPT_MODE & 0o700 != 0o700:
                self._modes.append((f"{project}/{relative}", entry.mode & KEPT_MODE))

    def _folder(self, made: str) -> int:
        """A directory this restore made, opened one name at a time from the staging
        directory: a path may be longer than the system takes whole (PATH_MAX), as a tree
        someone made with a shell can be; entries come folder by folder, so it stays open
        for the next."""
        if self._parent is not None and self._parent[0] == made:
            return self._parent[1]
        fd = _descend(self._top, made)
        if self._parent is not None:
            os.close(self._parent[1])
        self._parent = (made, fd)
        return fd

    def _make(self, folder: int, name: str, entry: StoredEntry, content: BinaryIO | None) -> None:
        if entry.kind == "dir":
            os.mkdir(name, 0o700, dir_fd=folder)
            made = os.open(name, _DIRECTORY, dir_fd=folder)
            try:
                # Writable by the restore until the end.
                os.fchmod(made, (entry.mode & KEPT_MODE) | 0o700)
            finally:
                os.close(made)
        elif entry.kind == "link":
            os.symlink(entry.target, name, dir_fd=folder)
        else:
            fd = os.open(name, _CREATE, 0o600, dir_fd=folder)
            try:
                left = entry.size
                while left > 0 and content is not None:
                    block = content.read(min(_BLOCK, left))
                    if not block:
                        break
                    _write_all(fd, block)
                    left -= len(block)
                if left:
                    raise BackupEntryError(f"the archive's {entry.path!r} is cut short")
                os.fchmod(fd, entry.mode & KEPT_MODE)
                os.utime(fd, (entry.mtime, entry.mtime))
            finally:
                os.close(fd)

    def staged_projects(self) -> list[int]:
        """The projects this restore has storage for."""
        return sorted(int(name) for name in os.listdir(self.directory) if name.isdigit())

    def swap_in(
        self, *, replace_all: bool, keep: AbstractSet[int] = frozenset(), token: str
    ) -> list[int]:
        """(Blocking) Give the staged directories their modes and rename each project into
        place; what was there is moved aside (kept until `finish`, put back by `swap_back`).
        `replace_all`: every other project's storage is moved aside too (a restore that
        replaces the installation), but that of the projects in `keep` (the restored
        database has them, the archive carries no storage for them), which stays as it is.
        Returns the projects whose storage stayed so.

        The renames are written down first (SWAP_JOURNAL, with `token`, which the database's
        restore records as it commits): a restore killed between the renames and the end of
        its commit leaves the journal, and `staging_leftovers_remove` finishes the swap or
        puts every project back, by whether that commit happened."""
        self._folder_close()
        for made, mode in reversed(self._modes):  # the deepest first: their parents open
            fd = _descend(self._top, made)
            try:
                os.fchmod(fd, mode)
            finally:
                os.close(fd)
        staged = {str(pid) for pid in self.staged_projects()}
        present = {p.name for p in self.base.iterdir() if p.name.isdigit()}
        kept = (present & {str(int(pid)) for pid in keep}) - staged if replace_all else set()
        moves = [
            (name, temp_name() if name in present else None, name in staged)
            for name in sorted(staged | (present - kept if replace_all else set()))
        ]
        _journal_write(self._top, {"token": token, "moves": moves})
        for name, aside_name, is_staged in moves:
            place = self.base / name
            aside = None
            if aside_name is not None and (place.exists() or place.is_symlink()):
                aside = self.base / aside_name
                os.rename(place, aside)
            self._placed.append((place, aside))
            if is_staged:
                os.rename(self.directory / name, place)
        base = os.open(self.base, _DIRECTORY)
        try:
            fsync_dir(base)
        finally:
            os.close(base)
        return sorted(int(name) for name in kept)

    def swap_back(self) -> None:
        """(Blocking) Undo `swap_in`: the projects as they were before the restore."""
        for place, aside in reversed(self._placed):
            if place.exists() or place.is_symlink():
                os.rename(place, self.directory / place.name)
            if aside is not None:
                os.rename(aside, place)
        self._placed.clear()

    def finish(self) -> None:
        """(Blocking) Remove what `swap_in` moved aside: the restore is committed."""
        for _, aside in self._placed:
            if aside is not None:
                shutil.rmtree(aside, ignore_errors=True)
        self._placed.clear()

    def discard(self) -> None:
        """(Blocking) Remove the staging directory and whatever is still in it."""
        self._folder_close()
        os.close(self._top)
        shutil.rmtree(self.directory, ignore_errors=True)  # by descriptors: any depth
        os.close(self._lock)  # what a failed removal left, the sweep removes

    def _folder_close(self) -> None:
        if self._parent is not None:
            os.close(self._parent[1])
            self._parent = None


def _descend(top: int, relative: str) -> int:
    """The directory at `relative` under `top`, opened name by name, no link followed."""
    fd = os.dup(top)
    for name in relative.split("/"):
        try:
            inner = os.open(name, _DIRECTORY, dir_fd=fd)
        finally:
            os.close(fd)
        fd = inner
    return fd


def _lock_hold(directory: Path) -> int:
    """Lock a new staging directory's STAGING_LOCK, held until closed. It is locked under
    another name and renamed: a sweep that found it unlocked would take the directory away."""
    locking = directory / temp_name()
    fd = os.open(locking, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.rename(locking, directory / STAGING_LOCK)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _journal_write(directory: int, journal: dict) -> None:
    """Write SWAP_JOURNAL into the open directory durably: whole (a rename of a written
    and synced file) before any rename it lists."""
    temporary = temp_name()
    fd = os.open(temporary, _CREATE, 0o600, dir_fd=directory)
    try:
        _write_all(fd, json.dumps(journal).encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    os.rename(temporary, SWAP_JOURNAL, src_dir_fd=directory, dst_dir_fd=directory)
    fsync_dir(directory)


def _write_all(fd: int, block: bytes) -> None:
    view = memoryview(block)
    while view:
        view = view[os.write(fd, view) :]


def storage_holds_projects() -> bool:
    """Whether any project has something in the storage (a restore refuses to mix)."""
    base = Path(settings.ROJO_STORAGE_DIR)
    if not base.is_dir():
        return False
    for path in base.iterdir():
        if path.name.isdigit() and any((path / part).exists() for part in PARTS):
            return True
    return False
