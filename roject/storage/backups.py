"""A project's storage read out as a backup's entries, and a restore's entries put in place.

A backup holds, per project, `root/` (the files), `undo/` (the copies undo restores),
`images/` and `pdfs/` (the images and PDFs attached to messages) and `results/` (the tool
results kept for conversations, which their read_result handles name):
every directory, regular file and symbolic link, with its mode and modification time. It
leaves out what is no data: `changes.lock`, `incoming/` (uploads not moved in yet: an upload
is placed under the change lock, which the backup holds) and the temporary names of a write
or snapshot a crash cut off. Links are kept as links and never followed, on either side.
The restore's side, its staging directory, is ./staging.py.
"""

import logging
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import BinaryIO, Literal

from .layout import project_dir
from .paths import StorageError, is_temp_file

logger = logging.getLogger(__name__)

Kind = Literal["dir", "file", "link"]
# The parts of a project's directory a backup holds.
# images, pdfs: attached to messages (kept.py); results: tool results kept (results.py).
PARTS = ("root", "undo", "images", "pdfs", "results")
# How deep a link may be in each part: root/<…>, undo/<key>/<…>; never in the others.
_LINK_DEPTH = {"root": 2, "undo": 3}
_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class BackupEntryError(StorageError):
    """An archive's storage entry that cannot be restored (a bad name, a duplicate)."""


@dataclass(frozen=True, kw_only=True)
class StoredEntry:
    """One entry of a project's storage: its path under the project's directory
    (`root/a/b.txt`, `undo/<key>/0`), what it is, its mode and time; a file's size, a
    link's target."""

    path: str
    kind: Kind
    mode: int
    mtime: int
    size: int = 0
    target: str = ""


def project_entries(project_id: int) -> Iterator[tuple[StoredEntry, BinaryIO | None]]:
    """(Blocking) Every entry of the project's storage, parents before children, names in
    order; a regular file comes with its content open for reading (closed once the next
    entry is asked for). The caller holds the project's change lock, so nothing changes
    meanwhile; a project with no directory has no entries."""
    try:
        base = os.open(project_dir(project_id), _DIRECTORY)
    except FileNotFoundError:
        return
    try:
        for part in PARTS:
            try:
                top = os.open(part, _DIRECTORY, dir_fd=base)
            except (FileNotFoundError, NotADirectoryError):
                continue
            try:
                yield from _tree_entries(part, top)
            finally:
                os.close(top)
    finally:
        os.close(base)


def _tree_entries(part: str, top: int) -> Iterator[tuple[StoredEntry, BinaryIO | None]]:
    # fwalk follows no link: a link to a directory is listed among the directories, not
    # entered, and is kept below as the link it is.
    for dirpath, dirnames, filenames, dir_fd in os.fwalk(".", dir_fd=top):
        dirnames[:] = sorted(name for name in dirnames if not is_temp_file(name))
        here = str(PurePosixPath(part, dirpath))
        st = os.fstat(dir_fd)
        yield StoredEntry(path=here, kind="dir", mode=_mode(st), mtime=int(st.st_mtime)), None
        for name in sorted(filenames) + dirnames:
            if is_temp_file(name):
                continue
            path = f"{here}/{name}"
            try:
                st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            except FileNotFoundError:
                continue
            if stat.S_ISLNK(st.st_mode):
                target = os.readlink(name, dir_fd=dir_fd)
                entry = StoredEntry(
                    path=path, kind="link", mode=_mode(st), mtime=int(st.st_mtime), target=target
                )
                yield entry, None
            elif stat.S_ISREG(st.st_mode):
                yield from _file_entry(path, name, dir_fd)
            # a directory is yielded as the walk enters it; a FIFO or socket is no data


def _file_entry(path: str, name: str, dir_fd: int) -> Iterator[tuple[StoredEntry, BinaryIO]]:
    try:
        fd = os.open(name, _READ, dir_fd=dir_fd)
    except FileNotFoundError:  # its project's storage being removed (a deleted project)
        return
    with os.fdopen(fd, "rb") as content:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):  # swapped since the listing
            return
        if st.st_nlink > 1:  # a window onto a file elsewhere, which the gate never reads
            logger.warning("backup: %s left out: it has other hard links", path)
            return
        entry = StoredEntry(
            path=path, kind="file", mode=_mode(st), mtime=int(st.st_mtime), size=st.st_size
        )
        yield entry, content


def _mode(st: os.stat_result) -> int:
    return stat.S_IMODE(st.st_mode)


def entry_path_checked(path: str, kind: str = "dir") -> PurePosixPath:
    """The entry's path if it is one a backup writes: relative, under one of PARTS, with
    no empty, `.` or `..` part; a link only where the app makes one (inside the root, and
    inside an undo copy of it): a tampered archive's `root` or `undo/<key>` linked to `/`
    would take the gate there."""
    pure = PurePosixPath(path)
    parts = path.split("/")
    if (
        pure.is_absolute()
        or not parts
        or parts[0] not in PARTS
        or any(part in ("", ".", "..") for part in parts)
        or (kind == "link" and len(parts) < _LINK_DEPTH.get(parts[0], len(parts) + 1))
    ):
        raise BackupEntryError(f"the archive holds a storage entry that is not allowed: {path!r}")
    return pure
