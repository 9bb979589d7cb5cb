"""Undo restores: the paths a snapshot kept, put back into the project root.

Copies are put back into directories held open (beneath), so a swap cannot redirect them,
each by renames, so a crash never leaves a half-copied file. Deciding whether a restore may
happen (the digests compared, the records kept) is the caller's.
"""

import contextlib
import os
import stat
from pathlib import Path, PurePosixPath

from .beneath import Root
from .entries import entry_copy, entry_remove, fsync_dir, temp_name
from .paths import StorageError, reported
from .snapshots import Snapshot, present_at, snapshot_discard

_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def snapshot_restore(root: Path, snapshot: Snapshot, *, discard: bool = True) -> None:
    """Put every path back as the snapshot has it, then discard the snapshot (blocking;
    `discard` False keeps it, for a caller that records the restore first).

    Each path's copy is made beside it under a temporary name and renamed into place: a
    crash leaves a file as the change left it or restored, never half copied (a directory
    takes two renames), and a restore run again finishes one a crash cut off. The caller
    checks first that nothing changed since.
    """
    with reported(", ".join(snapshot.paths)), Root(root) as opened_root:
        # The paths the call made go first: a move's source and destination may swap places.
        for relative, existed in zip(snapshot.paths, snapshot.existed, strict=True):
            with reported(relative):
                at = None if existed else present_at(opened_root, relative)
                if at is not None:
                    with at:
                        entry_remove(at.dir_fd, at.name)
        if any(snapshot.existed):
            copies = os.open(snapshot.directory, _DIRECTORY)
            try:
                for number, relative in enumerate(snapshot.paths):
                    if snapshot.existed[number]:
                        with reported(relative):
                            _put_back(copies, str(number), opened_root, relative)
            finally:
                os.close(copies)
        _remove_created_parents(opened_root, snapshot.missing_parents)
    if discard:
        snapshot_discard(snapshot)


def _put_back(copies: int, copy: str, root: Root, relative: str) -> None:
    """Replace the entry at `relative` (or fill its place) with a copy of `copy`, by renames.

    A file or link takes the place of another in one rename. A directory cannot replace a
    directory that way: the old one is renamed aside, the new one in, then the old removed.
    """
    with root.entry(relative, make_parents=True) as at:
        staged = temp_name()
        try:
            entry_copy(copies, copy, at.dir_fd, staged, label=relative, durable=True)
            current = at.lstat()
            staged_st = os.stat(staged, dir_fd=at.dir_fd, follow_symlinks=False)
            if current is not None and (
                stat.S_ISDIR(current.st_mode) or stat.S_ISDIR(staged_st.st_mode)
            ):
                _swap_in(at.dir_fd, staged, at.name)
            else:
                os.replace(staged, at.name, src_dir_fd=at.dir_fd, dst_dir_fd=at.dir_fd)
        except BaseException:
            with contextlib.suppress(OSError):
                entry_remove(at.dir_fd, staged)
            raise
        fsync_dir(at.dir_fd)


def _swap_in(dir_fd: int, staged: str, name: str) -> None:
    """Rename `name` aside and `staged` into its place; the old entry is removed after."""
    aside = temp_name()
    os.rename(name, aside, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    try:
        os.rename(staged, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        os.rename(aside, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        raise
    entry_remove(dir_fd, aside)


def _remove_created_parents(root: Root, created: list[str]) -> None:
    """Remove the parents the call created, deepest first, if nothing else was put in them."""
    for relative in sorted(created, key=_depth, reverse=True):
        # Kept when not empty (it holds newer work) or no longer a directory inside the root.
        with contextlib.suppress(StorageError, OSError):
            at = present_at(root, relative)
            if at is not None:
                with at:
                    st = at.lstat()
                    if st is not None and stat.S_ISDIR(st.st_mode):
                        os.rmdir(at.name, dir_fd=at.dir_fd)


def _depth(relative: str) -> int:
    return len(PurePosixPath(relative).parts)


def snapshot_path_restore(root: Path, snapshot: Snapshot, number: int) -> None:
    """Put path `number` back as the snapshot has it, keeping the snapshot (blocking).

    For restoring an older version: the snapshot stays the undo copy of its own change.
    A path the snapshot holds as absent is removed.
    """
    relative = snapshot.paths[number]
    with reported(relative), Root(root) as opened_root:
        if not snapshot.existed[number]:
            at = present_at(opened_root, relative)
            if at is not None:
                with at:
                    entry_remove(at.dir_fd, at.name)
            return
        copies = os.open(snapshot.directory, _DIRECTORY)
        try:
            _put_back(copies, str(number), opened_root, relative)
        finally:
            os.close(copies)
