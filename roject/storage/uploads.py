"""Uploads: bytes streamed into a file beside the root, then moved into it with one rename.

An upload is received into ROJO_STORAGE_DIR/<project>/incoming/ (outside the root, so a
half-received file is never seen in the project), fsynced, and only then renamed to its
place, resolved through the gate like any path: a crash leaves the old file or the new one.
"""

import contextlib
import os
import shutil
import stat
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .beneath import DIRECTORY_MODE, FILE_MODE, opened
from .entries import entry_remove, fsync_dir, temp_name
from .files import open_regular_file
from .layout import incoming_dir_create
from .paths import EntryExists, PathError, StorageError, TooLarge, refuse_hard_links, reported

_BLOCK = 1 << 20

Emit = Callable[[bytes], None]


@dataclass(frozen=True)
class Incoming:
    """A received upload (a file or a directory), not yet in the project."""

    path: Path
    size: int


def upload_receive(*, project_id: int, read: Callable[[int], bytes], max_bytes: int) -> Incoming:
    """(Blocking) Stream what `read` gives into a new file under incoming/; TooLarge past
    `max_bytes`, DiskFull when it does not fit (nothing kept of it either way)."""
    path = incoming_dir_create(project_id) / uuid.uuid4().hex
    size = 0
    with reported("the upload"):
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(path, flags, 0o600)
        try:
            with os.fdopen(fd, "wb") as fh:
                while chunk := read(_BLOCK):
                    size += len(chunk)
                    if size > max_bytes:
                        raise TooLarge(f"the upload is over the limit of {max_bytes:,} bytes")
                    fh.write(chunk)
                fh.flush()
                os.fsync(fh.fileno())
        except BaseException:
            path.unlink(missing_ok=True)
            raise
    return Incoming(path=path, size=size)


def incoming_discard(incoming: Incoming) -> None:
    """Remove a received upload that was not moved in (or what is left of it)."""
    if incoming.path.is_dir() and not incoming.path.is_symlink():
        shutil.rmtree(incoming.path, ignore_errors=True)
    else:
        incoming.path.unlink(missing_ok=True)


def upload_place(project_root: Path, relative: str, incoming: Incoming, *, overwrite: bool):
    """(Blocking) Move a received file or directory to `relative` in the root, making its
    parents; an existing entry is replaced only with `overwrite` (a directory by a
    directory, swapped in by renames, a file by a file)."""
    if relative.rstrip("/") in ("", "."):
        raise PathError("give a path for the upload, not the project root")
    is_dir = incoming.path.is_dir()
    with opened(project_root, relative) as root, root.entry(relative, make_parents=True) as at:
        current = at.lstat()
        if current is not None:
            if not overwrite:
                raise EntryExists(f"{relative!r} exists already")
            if stat.S_ISDIR(current.st_mode) != is_dir:
                kind = "a folder" if stat.S_ISDIR(current.st_mode) else "a file"
                raise StorageError(f"{relative!r} is {kind}; it cannot be replaced by this")
            if stat.S_ISREG(current.st_mode):
                refuse_hard_links(current, relative)
        os.chmod(incoming.path, DIRECTORY_MODE if is_dir else FILE_MODE)
        if current is not None and is_dir:
            aside = temp_name()
            os.rename(at.name, aside, src_dir_fd=at.dir_fd, dst_dir_fd=at.dir_fd)
            os.rename(incoming.path, at.name, dst_dir_fd=at.dir_fd)
            with contextlib.suppress(OSError):
                entry_remove(at.dir_fd, aside)
        else:
            os.rename(incoming.path, at.name, dst_dir_fd=at.dir_fd)
        fsync_dir(at.dir_fd)


def file_download_open(project_root: Path, relative: str) -> Callable[[Emit], None]:
    """(Blocking) Open a regular file of the project for a download, and return what streams
    it (giving each block to `emit`, then closing it).

    Opened now, before any response starts, through the gate's check of what is read: a
    directory, a FIFO or device, a file with other hard links are refused here with the
    refusal the tools give, never once the response is under way. The stream reads the very
    file that was checked, so nothing swapped in meanwhile is sent.
    """
    with contextlib.ExitStack() as stack:
        fh = stack.enter_context(open_regular_file(project_root, relative))
        held = stack.pop_all()

    def stream(emit: Emit) -> None:
        with held:
            for block in iter(lambda: fh.read(_BLOCK), b""):
                emit(block)

    return stream
