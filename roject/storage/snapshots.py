"""Snapshots for undo: the state of some paths copied aside, fingerprinted, and put back.

A snapshot copies the previous state of each path to ROJO_STORAGE_DIR/<project>/undo/<key>/<n>,
outside the project root, with the list of parent directories that did not exist yet (a call
creates them on the way; a restore removes them again when they are empty). Deciding whether a
restore may happen (the digests compared, the records kept) is the caller's.
"""

import contextlib
import hashlib
import os
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from .entries import (
    entry_copy,
    entry_remove,
    fsync_dir,
    is_present,
    is_real_directory,
    temp_beside,
)
from .layout import undo_dir
from .paths import StorageError, reported, resolve_entry


@dataclass
class Snapshot:
    """The state of some paths before a call, kept until the call's change is recorded."""

    key: str
    paths: list[str]
    existed: list[bool]
    directory: Path
    # Parent directories that did not exist: the call creates them, an undo removes them.
    missing_parents: list[str]


def snapshot_of(
    *, project_id: int, key: str, paths: list[str], existed: list[bool], missing_parents: list[str]
) -> Snapshot:
    """A snapshot taken earlier, as its change record describes it."""
    return Snapshot(
        key=key,
        paths=paths,
        existed=existed,
        directory=undo_dir(project_id, key),
        missing_parents=missing_parents,
    )


def digest(path: Path) -> str | None:
    """A fingerprint of a file, link or directory tree as it is now; None when absent."""
    if path.is_symlink():
        return "link:" + os.readlink(path)
    if not path.exists():
        return None
    hasher = hashlib.sha256()
    if path.is_file():
        with path.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 16), b""):
                hasher.update(block)
        return "file:" + hasher.hexdigest()
    for dirpath, dirnames, filenames in os.walk(path):
        dirnames.sort()
        for name in sorted(filenames) + dirnames:
            entry = Path(dirpath) / name
            hasher.update(str(entry.relative_to(path)).encode() + b"\0")
            hasher.update(
                (digest(entry) if entry.is_file() or entry.is_symlink() else "d").encode()
            )
    return "dir:" + hasher.hexdigest()


def digests(root: Path, paths: list[str]) -> list[str | None]:
    """The fingerprint of each path in the root as it is now (None: absent)."""
    return [digest(resolve_entry(root, relative)) for relative in paths]


def snapshot_digests(snapshot: Snapshot) -> list[str | None]:
    """The fingerprint of each path as the snapshot kept it (None: it did not exist)."""
    return [
        digest(snapshot.directory / str(number)) if existed else None
        for number, existed in enumerate(snapshot.existed)
    ]


def _missing_parents(root: Path, relative: str) -> list[str]:
    """The parent directories of a path that do not exist (yet), deepest first."""
    missing = []
    for parent in PurePosixPath(relative.rstrip("/")).parents:
        if str(parent) == "." or is_present(resolve_entry(root, str(parent))):
            break
        missing.append(str(parent))
    return missing


def snapshot_take(project_id: int, root: Path, paths: list[str]) -> Snapshot:
    """Copy the current state of `paths` aside (blocking)."""
    key = uuid.uuid4().hex
    # Made only when there is something to copy: a call that creates a path needs none (undo
    # removes it), and directory operations are slow.
    directory = undo_dir(project_id, key)
    existed, missing = [], set()
    for number, relative in enumerate(paths):
        entry = resolve_entry(root, relative)
        with reported(relative):
            present = is_present(entry)
            if present:
                directory.mkdir(parents=True, exist_ok=True)
                entry_copy(entry, directory / str(number))
            else:
                missing.update(_missing_parents(root, relative))
        existed.append(present)
    return Snapshot(
        key=key,
        paths=paths,
        existed=existed,
        directory=directory,
        missing_parents=sorted(missing),
    )


def snapshot_discard(snapshot: Snapshot) -> None:
    """Remove the snapshot's copies (there may be none)."""
    shutil.rmtree(snapshot.directory, ignore_errors=True)


def snapshot_restore(root: Path, snapshot: Snapshot) -> None:
    """Put every path back as the snapshot has it, then discard the snapshot (blocking).

    Each path's copy is made beside it under a temporary name and renamed into place: a
    crash leaves a file as the change left it or restored, never half copied (a directory
    takes two renames). The caller checks first that nothing changed since.
    """
    # The paths the call made go first: a move's source and destination may swap places.
    for relative, existed in zip(snapshot.paths, snapshot.existed, strict=True):
        entry = resolve_entry(root, relative)
        with reported(relative):
            if not existed and is_present(entry):
                entry_remove(entry)
    for number, relative in enumerate(snapshot.paths):
        if snapshot.existed[number]:
            entry = resolve_entry(root, relative)
            with reported(relative):
                _put_back(snapshot.directory / str(number), entry)
    _remove_created_parents(root, snapshot.missing_parents)
    snapshot_discard(snapshot)


def _put_back(copy: Path, entry: Path) -> None:
    """Replace `entry` (or fill its place) with a copy of `copy`, by renames.

    A file or link takes the place of another in one rename. A directory cannot replace a
    directory that way: the old one is renamed aside, the new one in, then the old removed.
    """
    entry.parent.mkdir(parents=True, exist_ok=True)
    staged = temp_beside(entry)
    try:
        entry_copy(copy, staged)
        if staged.is_file() and not staged.is_symlink():
            _fsync_file(staged)
        if is_present(entry) and (is_real_directory(entry) or is_real_directory(staged)):
            _swap_in(staged, entry)
        else:
            os.replace(staged, entry)
    except BaseException:
        with contextlib.suppress(OSError):
            if is_present(staged):
                entry_remove(staged)
        raise
    fsync_dir(entry.parent)


def _swap_in(staged: Path, entry: Path) -> None:
    """Rename `entry` aside and `staged` into its place; the old entry is removed after."""
    aside = temp_beside(entry)
    os.rename(entry, aside)
    try:
        os.rename(staged, entry)
    except BaseException:
        os.rename(aside, entry)
        raise
    entry_remove(aside)


def _fsync_file(path: Path) -> None:
    """The copy's content is on disk before the rename makes it the file."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _remove_created_parents(root: Path, created: list[str]) -> None:
    """Remove the parents the call created, deepest first, if nothing else was put in them."""
    for relative in sorted(created, key=_depth, reverse=True):
        # Kept when not empty (it holds newer work) or no longer a directory inside the root.
        with contextlib.suppress(StorageError, OSError):
            entry = resolve_entry(root, relative)
            if is_real_directory(entry):
                entry.rmdir()


def _depth(relative: str) -> int:
    return len(PurePosixPath(relative).parts)
