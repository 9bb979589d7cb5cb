"""Snapshots for undo: the state of some paths copied aside and fingerprinted.

A snapshot copies the previous state of each path to ROJO_STORAGE_DIR/<project>/undo/<key>/<n>,
outside the project root (under a temporary name, renamed to <key> once complete), with the
list of parent directories that did not exist yet (a call creates them on the way; a restore,
in `restores`, removes them again when they are empty). Copies are made from directories
held open (beneath), so a swap cannot redirect them; a file with other hard links is not
copied (the call that would replace it is refused too).
"""

import hashlib
import os
import shutil
import stat
import uuid
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from .beneath import At, Root
from .entries import entry_copy, fsync_dir
from .layout import undo_dir, undo_staging_create
from .paths import reported
from .room import Needed, room_check

_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


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
    try:
        parent = os.open(Path(path).parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        return _digest_at(parent, Path(path).name)
    finally:
        os.close(parent)


def _digest_at(dir_fd: int, name: str) -> str | None:
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    if not stat.S_ISDIR(st.st_mode):
        return _leaf_digest(dir_fd, name, st)
    hasher = hashlib.sha256()
    top = os.open(name, _DIRECTORY, dir_fd=dir_fd)
    try:
        # The walk of os.walk (its order, its names), on descriptors: fwalk follows no link.
        for dirpath, dirnames, filenames, sub in os.fwalk(".", dir_fd=top):
            dirnames.sort()
            for entry in sorted(filenames) + dirnames:
                hasher.update(str(PurePosixPath(dirpath, entry)).encode() + b"\0")
                st = os.stat(entry, dir_fd=sub, follow_symlinks=False)
                inner = "d" if stat.S_ISDIR(st.st_mode) else _leaf_digest(sub, entry, st)
                hasher.update(inner.encode())
    finally:
        os.close(top)
    return "dir:" + hasher.hexdigest()


def _leaf_digest(dir_fd: int, name: str, st: os.stat_result) -> str:
    """A link's target, a file's content; anything else (a FIFO) as an empty directory was."""
    if stat.S_ISLNK(st.st_mode):
        return "link:" + os.readlink(name, dir_fd=dir_fd)
    hasher = hashlib.sha256()
    if stat.S_ISREG(st.st_mode):
        fd = os.open(
            name, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd
        )
        with os.fdopen(fd, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 16), b""):
                hasher.update(block)
        return "file:" + hasher.hexdigest()
    return "dir:" + hasher.hexdigest()


def present_at(root: Root, relative: str) -> At | None:
    """The entry at a path if something is there (the caller closes it), else None."""
    at = root.lookup(relative)
    if at is not None and at.lstat() is None:
        at.close()
        return None
    return at


def digests(root: Path, paths: list[str]) -> list[str | None]:
    """The fingerprint of each path in the root as it is now (None: absent)."""
    with Root(root) as opened_root:
        found = []
        for relative in paths:
            at = present_at(opened_root, relative)
            if at is None:
                found.append(None)
                continue
            with at:
                found.append(_digest_at(at.dir_fd, at.name))
        return found


def snapshot_digests(snapshot: Snapshot) -> list[str | None]:
    """The fingerprint of each path as the snapshot kept it (None: it did not exist)."""
    return [
        digest(snapshot.directory / str(number)) if existed else None
        for number, existed in enumerate(snapshot.existed)
    ]


def _missing_parents(root: Root, relative: str) -> list[str]:
    """The parent directories of a path that do not exist (yet), deepest first."""
    missing = []
    for parent in PurePosixPath(relative.rstrip("/")).parents:
        if str(parent) == ".":
            break
        at = present_at(root, str(parent))
        if at is not None:
            at.close()
            break
        missing.append(str(parent))
    return missing


def snapshot_take(project_id: int, root: Path, paths: list[str]) -> Snapshot:
    """Copy the current state of `paths` aside (blocking).

    The copies are made in a temporary directory beside the others and renamed to the
    snapshot's name once all are made: a snapshot cut off by a crash or a full disk is never
    taken for a whole one, and is removed (at once, or by the clean-up after a crash). One
    that would not fit, with room to spare, is refused before anything is written (DiskFull).
    """
    key = uuid.uuid4().hex
    directory = undo_dir(project_id, key)
    with reported(", ".join(paths)), Root(root) as opened_root:
        present = [present_at(opened_root, relative) for relative in paths]
        try:
            if any(at is not None for at in present):
                room_check(undo_dir(project_id, key).parent, _size(present), ", ".join(paths))
                _copies_make(project_id, key, paths, present)
            missing = set()
            for relative, at in zip(paths, present, strict=True):
                if at is None:
                    missing.update(_missing_parents(opened_root, relative))
        finally:
            for at in present:
                if at is not None:
                    at.close()
    return Snapshot(
        key=key,
        paths=paths,
        existed=[at is not None for at in present],
        directory=directory,
        missing_parents=sorted(missing),
    )


def _size(present: list) -> Needed:
    """What copying the entries that are there takes (their bytes, their entries)."""
    needed = Needed()
    for at in present:
        if at is not None:
            needed.add_entry(at.dir_fd, at.name)
    return needed


def _copies_make(project_id: int, key: str, paths: list[str], present: list) -> None:
    """Copy each entry there into a staging directory, then rename it to the snapshot's."""
    staging, copies = undo_staging_create(project_id)
    try:
        for number, (relative, at) in enumerate(zip(paths, present, strict=True)):
            if at is not None:
                with reported(relative):
                    entry_copy(at.dir_fd, at.name, copies, str(number), label=relative)
        undo = os.open(staging.parent, _DIRECTORY)
        try:
            os.rename(staging.name, key, src_dir_fd=undo, dst_dir_fd=undo)
            fsync_dir(undo)
        finally:
            os.close(undo)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    finally:
        os.close(copies)


def snapshot_discard(snapshot: Snapshot) -> None:
    """Remove the snapshot's copies (there may be none)."""
    shutil.rmtree(snapshot.directory, ignore_errors=True)


def snapshot_text(snapshot: Snapshot, number: int, limit: int) -> str | None:
    """The text of the snapshot's copy of path `number`: "" when it did not exist, None when
    it is no UTF-8 text file of at most `limit` bytes (a directory, a binary, a big file)."""
    if not snapshot.existed[number]:
        return ""
    try:
        fd = os.open(snapshot.directory / str(number), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
            return None
        data = os.read(fd, limit + 1)
    finally:
        os.close(fd)
    try:
        return None if b"\0" in data else data.decode("utf-8")
    except UnicodeDecodeError:
        return None
