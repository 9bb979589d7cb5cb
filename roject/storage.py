"""The storage gate: every file operation on a project goes through `resolve()`.

Paths come from a model and are untrusted. They are always relative to the project root and
never reach anything outside it, whatever `..`, absolute paths, symlinks or NUL bytes they try.
The functions here are blocking; async callers run them with `asyncio.to_thread`.
Error messages name only the relative path the caller gave, never a server path.
"""

import contextlib
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from django.conf import settings

_DRIVE = re.compile(r"^[A-Za-z]:")


class StorageError(Exception):
    """A file operation failed in a way the caller should report, not crash on."""


class PathError(StorageError):
    """A path that is not allowed: outside the root, absolute, or malformed."""


def project_root(project_id: int) -> Path:
    """Where a project's files live: ROJO_STORAGE_DIR/<project_id>/root."""
    return Path(settings.ROJO_STORAGE_DIR) / str(int(project_id)) / "root"


def project_storage_remove(project_id: int) -> None:
    """Remove everything a deleted project kept on disk: its files and its undo copies."""
    shutil.rmtree(Path(settings.ROJO_STORAGE_DIR) / str(int(project_id)), ignore_errors=True)


def project_root_create(project_id: int) -> Path:
    """Create the project's root directory (idempotent) and return it."""
    root = project_root(project_id)
    root.mkdir(parents=True, exist_ok=True)
    return root


def _check_form(relative_path: str) -> None:
    """Refuse what is never a relative path: non-strings, NUL bytes, backslashes, absolutes."""
    if not isinstance(relative_path, str):
        raise PathError("path must be a string")
    if "\x00" in relative_path:
        raise PathError("path must not contain NUL bytes")
    if "\\" in relative_path:
        raise PathError(f"path {relative_path!r} must use forward slashes")
    if relative_path.startswith("/") or _DRIVE.match(relative_path):
        raise PathError(
            f"path {relative_path!r} is absolute; use a path relative to the project root"
        )


def resolve(project_root: Path, relative_path: str) -> Path:
    """Return the real location of `relative_path` inside `project_root`, or raise PathError.

    The comparison is made on fully resolved paths (symlinks followed) with path semantics,
    so neither `../`, a symlink pointing out, nor a sibling such as `root_evil/` gets through.
    The empty path and `.` mean the root itself.
    """
    _check_form(relative_path)
    root = Path(project_root).resolve()
    try:
        target = (root / PurePosixPath(relative_path)).resolve()
    except RuntimeError:
        # Python < 3.13 raises RuntimeError, naming the server path, on a symlink loop.
        raise PathError(f"path {relative_path!r} runs into a symlink loop") from None
    except OSError as exc:  # a component changed while it was read (moved, say)
        reason = exc.strerror or exc.__class__.__name__
        raise PathError(f"path {relative_path!r} cannot be resolved: {reason}") from None
    if not target.is_relative_to(root):
        raise PathError(f"path {relative_path!r} is outside the project root")
    return target


def resolve_entry(project_root: Path, relative_path: str) -> Path:
    """The directory entry itself (a final symlink is not followed), inside the root.

    For operations on names rather than contents: deleting or moving a symlink must act
    on the link, never on what it points to. The root itself is refused.
    """
    # Only the parent is resolved: a link pointing out of the root (or nowhere) is still
    # an entry inside it, which can be moved or deleted without touching its target.
    _check_form(relative_path)
    pure = PurePosixPath(relative_path.rstrip("/"))
    if pure.name in ("", ".", ".."):
        raise PathError(f"path {relative_path!r} does not name a file or directory")
    try:
        parent = resolve(project_root, str(pure.parent))
    except PathError:
        resolve(project_root, relative_path)  # to name the whole path in the message
        raise
    return parent / pure.name


@contextlib.contextmanager
def reported(relative_path: str) -> Iterator[None]:
    """Turn an OSError into a StorageError that names the relative path only."""
    try:
        yield
    except OSError as exc:
        reason = exc.strerror or exc.__class__.__name__
        raise StorageError(f"{reason}: {relative_path!r}") from exc


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


# An atomic write's temporary file, next to its target until the rename.
TEMP_PREFIX, TEMP_SUFFIX = ".rojo-", ".tmp"


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
        _fsync_dir(path.parent)


def _fsync_dir(directory: Path) -> None:
    """Make the rename durable; some filesystems do not support it, which is fine."""
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def is_temp_file(name: str) -> bool:
    """Temporary files of an atomic write in progress are not part of the project."""
    return name.startswith(TEMP_PREFIX) and name.endswith(TEMP_SUFFIX)


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
