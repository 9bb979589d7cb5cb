"""Reading, writing, listing and creating files in a project root, each path resolved first.

The functions here are blocking; async callers run them with `asyncio.to_thread`.
"""

import contextlib
import os
import stat
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO

from django.conf import settings

from .entries import fsync_dir
from .paths import (
    TEMP_PREFIX,
    TEMP_SUFFIX,
    PathError,
    StorageError,
    is_temp_file,
    reported,
    resolve,
)


def _iso_utc(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, tz=UTC).isoformat().replace("+00:00", "Z")


def path_meta(project_root: Path, relative_path: str) -> dict:
    """Type, size and modification time of a file or directory."""
    path = resolve(project_root, relative_path)
    with reported(relative_path):
        st = path.stat()
    kind = "directory" if stat.S_ISDIR(st.st_mode) else "file"
    return {"type": kind, "size": st.st_size, "modifiedAt": _iso_utc(st.st_mtime)}


@contextlib.contextmanager
def open_regular_file(
    project_root: Path, relative_path: str, *, max_size: int | None = None
) -> Iterator[BinaryIO]:
    """Open a regular file for binary reading, refusing directories, devices and FIFOs.

    The file is opened non-blocking and checked with fstat on the open descriptor, so a FIFO
    cannot hang the reader and a file swapped between check and read is still caught.
    """
    path = resolve(project_root, relative_path)
    with reported(relative_path):
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
        # The descriptor is checked and closed here: os.fdopen() refuses a directory with
        # IsADirectoryError and, given an fd, leaves it open.
        try:
            st = os.fstat(fd)
            if stat.S_ISDIR(st.st_mode):
                raise StorageError(f"{relative_path!r} is a directory, not a file")
            if not stat.S_ISREG(st.st_mode):
                raise StorageError(f"{relative_path!r} is not a regular file")
            if max_size is not None and st.st_size > max_size:
                raise StorageError(
                    f"{relative_path!r} is {st.st_size} bytes, over the {max_size}-byte "
                    "read limit; read it in parts with offset and limit"
                )
            with os.fdopen(fd, "rb", closefd=False) as fh:
                yield fh
        finally:
            os.close(fd)


def read_project_file(project_root: Path, relative_path: str) -> str:
    """Read a UTF-8 text file, refusing directories, devices, FIFOs, binaries and big files."""
    limit = settings.ROJO_MAX_READ_BYTES
    with open_regular_file(project_root, relative_path, max_size=limit) as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise StorageError(f"{relative_path!r} is over the {limit}-byte read limit")
    if b"\x00" in data:
        raise StorageError(f"{relative_path!r} is a binary file, not text")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise StorageError(f"{relative_path!r} is not UTF-8 text") from None


def temp_files_remove(project_root: Path, relative_dirs: set[str]) -> None:
    """Remove the temporary files that writes killed before their rename left in these
    directories. Only while no write can be running in them (the project's change lock)."""
    for relative in relative_dirs:
        try:
            directory = resolve(project_root, relative)
            entries = list(os.scandir(directory))
        except (StorageError, OSError):
            continue
        for entry in entries:
            if is_temp_file(entry.name):
                with contextlib.suppress(OSError):
                    if entry.is_file(follow_symlinks=False):
                        os.unlink(entry.path)


def write_project_file(project_root: Path, relative_path: str, text: str) -> None:
    """Write UTF-8 text atomically, creating parent directories inside the root.

    The text goes to a temporary file in the same directory, is flushed and fsynced, then
    renamed over the target: a crash leaves either the old file or the new one, never half.
    """
    if not isinstance(text, str):
        raise StorageError("text must be a string")
    data = text.encode("utf-8")
    limit = settings.ROJO_MAX_WRITE_BYTES
    if len(data) > limit:
        raise StorageError(f"text is {len(data)} bytes, over the {limit}-byte write limit")
    if relative_path.endswith("/"):
        raise PathError(f"path {relative_path!r} ends with '/'; give a file path")
    path = resolve(project_root, relative_path)
    if path == Path(project_root).resolve():
        raise PathError("cannot write to the project root itself; give a file path")
    with reported(relative_path):
        if path.is_dir():
            raise StorageError(f"{relative_path!r} is a directory")
        path.parent.mkdir(parents=True, exist_ok=True)
        # The parent chain may have changed since resolve(); check again before writing.
        resolve(project_root, relative_path)
        mode = path.stat().st_mode & 0o777 if path.exists() else 0o644
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=TEMP_PREFIX, suffix=TEMP_SUFFIX)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.chmod(tmp, mode)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        fsync_dir(path.parent)


def _stays_inside(project_root: Path, entry: os.DirEntry) -> bool:
    """A symlink pointing out of the root is left out: listing it would tell what is outside."""
    if not entry.is_symlink():
        return True
    try:
        return Path(entry.path).resolve().is_relative_to(Path(project_root).resolve())
    except (OSError, RuntimeError):
        return False


def list_directory(project_root: Path, relative_path: str) -> list[dict]:
    """The entries of a directory, sorted by name, each with its type."""
    path = resolve(project_root, relative_path)
    with reported(relative_path):
        if not path.is_dir():
            if path.exists():
                raise StorageError(f"{relative_path!r} is a file, not a directory")
            raise StorageError(f"No such directory: {relative_path!r}")
        with os.scandir(path) as entries:
            listing = [
                {"name": e.name, "type": "directory" if e.is_dir() else "file"}
                for e in entries
                if not is_temp_file(e.name) and _stays_inside(project_root, e)
            ]
    listing.sort(key=lambda entry: entry["name"])
    return listing


def create_directory(project_root: Path, relative_path: str) -> None:
    """Create a directory and its parents; an existing directory is fine, a file is not."""
    path = resolve(project_root, relative_path)
    with reported(relative_path):
        if path.exists() and not path.is_dir():
            raise StorageError(f"{relative_path!r} exists and is a file")
        path.mkdir(parents=True, exist_ok=True)
