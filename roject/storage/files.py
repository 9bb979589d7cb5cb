"""Reading, writing, listing and creating files in a project root, on descriptors.

Each path is resolved from the root's descriptor and the operation acts on what that opened
(beneath), so nothing swapped meanwhile can redirect it. The functions here are blocking;
async callers run them with `asyncio.to_thread`.
"""

import codecs
import contextlib
import os
import stat
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from django.conf import settings

from .beneath import FILE_MODE, Root, opened
from .entries import fsync_dir, temp_name
from .paths import PathError, StorageError, is_temp_file, refuse_hard_links

_O_PATH = getattr(os, "O_PATH", os.O_RDONLY)


def iso_utc(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, tz=UTC).isoformat().replace("+00:00", "Z")


def path_meta(project_root: Path, relative_path: str) -> dict:
    """Type, size and modification time of a file or directory."""
    with opened(project_root, relative_path) as root:
        fd = root.open(relative_path)
        try:
            st = os.fstat(fd)
        finally:
            os.close(fd)
    refuse_hard_links(st, relative_path)  # its size and time are another file's too
    kind = "directory" if stat.S_ISDIR(st.st_mode) else "file"
    return {"type": kind, "size": st.st_size, "modifiedAt": iso_utc(st.st_mtime)}


@contextlib.contextmanager
def regular_file(fd: int, label: str, *, max_size: int | None = None) -> Iterator[BinaryIO]:
    """The open file `fd` for binary reading, if it is a regular file of one link; closed after.

    Checked with fstat on the descriptor itself: what was opened is what is read.
    """
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise StorageError(f"{label!r} is a directory, not a file")
        if not stat.S_ISREG(st.st_mode):
            raise StorageError(f"{label!r} is not a regular file")
        refuse_hard_links(st, label)
        if max_size is not None and st.st_size > max_size:
            raise StorageError(
                f"{label!r} is {st.st_size} bytes, over the {max_size}-byte read limit; "
                "read it in parts with offset and limit"
            )
        # os.fdopen() given an fd leaves it open with closefd=False; it is closed here.
        with os.fdopen(fd, "rb", closefd=False) as fh:
            yield fh
    finally:
        os.close(fd)


@contextlib.contextmanager
def open_regular_file(
    project_root: Path, relative_path: str, *, max_size: int | None = None
) -> Iterator[BinaryIO]:
    """Open a regular file for binary reading, refusing directories, devices, FIFOs and files
    with other hard links. Opened non-blocking, so a FIFO cannot hang the reader."""
    with opened(project_root, relative_path) as root:
        fd = root.open(relative_path, os.O_RDONLY | os.O_NONBLOCK)
        with regular_file(fd, relative_path, max_size=max_size) as fh:
            yield fh


def text_of(data: bytes, relative_path: str) -> str:
    """The bytes of a whole file as text: UTF-8 without NUL bytes."""
    if b"\x00" in data:
        raise StorageError(f"{relative_path!r} is a binary file, not text")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise StorageError(f"{relative_path!r} is not UTF-8 text") from None


def read_project_file(project_root: Path, relative_path: str) -> str:
    """Read a UTF-8 text file, refusing directories, devices, FIFOs, binaries and big files."""
    limit = settings.ROJO_MAX_READ_BYTES
    with open_regular_file(project_root, relative_path, max_size=limit) as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise StorageError(f"{relative_path!r} is over the {limit}-byte read limit")
    return text_of(data, relative_path)


def text_start(project_root: Path, relative_path: str, *, max_bytes: int) -> tuple[str, int] | None:
    """The first `max_bytes` of a UTF-8 text file, whole characters only, and its size in
    bytes; None when nothing is there. For files read whether or not they exist (a
    project's instructions): a binary or undecodable one raises StorageError."""
    with opened(project_root, relative_path) as root:
        try:
            fd = root.open(relative_path, os.O_RDONLY | os.O_NONBLOCK)
        except (FileNotFoundError, NotADirectoryError):
            return None
        with regular_file(fd, relative_path) as fh:
            size = os.fstat(fh.fileno()).st_size
            data = fh.read(max_bytes)
    if b"\x00" in data:
        raise StorageError(f"{relative_path!r} is a binary file, not text")
    try:  # a cut may fall inside a character: its first bytes are left out
        text = codecs.getincrementaldecoder("utf-8")().decode(data, final=len(data) >= size)
    except UnicodeDecodeError:
        raise StorageError(f"{relative_path!r} is not UTF-8 text") from None
    return text, size


def temp_files_remove(project_root: Path, relative_dirs: set[str]) -> None:
    """Remove the temporary files that writes killed before their rename left in these
    directories. Only while no write can be running in them (the project's change lock)."""
    for relative in relative_dirs:
        with contextlib.suppress(StorageError), opened(project_root, relative) as root:
            fd = root.open_dir(relative)
            try:
                with os.scandir(fd) as scan:
                    names = [
                        e.name
                        for e in scan
                        if is_temp_file(e.name) and e.is_file(follow_symlinks=False)
                    ]
                for name in names:
                    with contextlib.suppress(OSError):
                        os.unlink(name, dir_fd=fd)
            finally:
                os.close(fd)


def write_project_file(project_root: Path, relative_path: str, text: str) -> None:
    """Write UTF-8 text atomically, creating parent directories inside the root.

    The text goes to a temporary file in the target's directory (held open), is flushed and
    fsynced, then renamed over the target in that same directory: a crash leaves either the
    old file or the new one, never half. A new file is 0644, whatever the umask.
    """
    if not isinstance(text, str):
        raise StorageError("text must be a string")
    data = text.encode("utf-8")
    limit = settings.ROJO_MAX_WRITE_BYTES
    if len(data) > limit:
        raise StorageError(f"text is {len(data)} bytes, over the {limit}-byte write limit")
    if relative_path.endswith("/"):
        raise PathError(f"path {relative_path!r} ends with '/'; give a file path")
    with opened(project_root, relative_path) as root:
        at = root.final(relative_path, make_parents=True)
        if at is None:
            _refuse_directory(root, relative_path)
        with at:
            mode = _replaced_mode(at.dir_fd, at.name, relative_path)
            tmp = temp_name()
            fd = os.open(
                tmp,
                os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                0o600,
                dir_fd=at.dir_fd,
            )
            try:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(data)
                    fh.flush()
                    os.fsync(fh.fileno())
                    os.fchmod(fh.fileno(), mode)
                os.replace(tmp, at.name, src_dir_fd=at.dir_fd, dst_dir_fd=at.dir_fd)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp, dir_fd=at.dir_fd)
                raise
            fsync_dir(at.dir_fd)


def _refuse_directory(root: Root, relative_path: str) -> None:
    """A path naming a directory itself (the root, or `x/..`) is no file to write."""
    fd = root.open(relative_path)
    try:
        if os.path.samestat(os.fstat(fd), os.fstat(root.fd)):
            raise PathError("cannot write to the project root itself; give a file path")
    finally:
        os.close(fd)
    raise StorageError(f"{relative_path!r} is a directory")


def _replaced_mode(dir_fd: int, name: str, relative_path: str) -> int:
    """The mode a write gives the file: the one it replaces keeps its own, a new one 0644."""
    try:
        fd = os.open(name, _O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    except FileNotFoundError:
        return FILE_MODE
    try:
        st = os.fstat(fd)
    finally:
        os.close(fd)
    if stat.S_ISDIR(st.st_mode):
        raise StorageError(f"{relative_path!r} is a directory")
    if not stat.S_ISREG(st.st_mode):  # a link swapped in since, say: it is replaced
        return FILE_MODE
    refuse_hard_links(st, relative_path)
    return stat.S_IMODE(st.st_mode) & 0o777


def _entry_type(root: Root, relative: str, entry: os.DirEntry) -> str | None:
    """The type listed for an entry: "directory" or "file"; None for a link that leads out
    of the root (or into a loop), since listing it would tell what is outside."""
    if not entry.is_symlink():
        return "directory" if entry.is_dir(follow_symlinks=False) else "file"
    try:
        fd = root.open(str(PurePosixPath(relative) / entry.name))
    except PathError:
        return None
    except OSError:
        return "file"  # a broken link inside the root
    try:
        return "directory" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file"
    finally:
        os.close(fd)


def list_directory(project_root: Path, relative_path: str) -> list[dict]:
    """The entries of a directory, sorted by name, each with its type."""
    with opened(project_root, relative_path) as root:
        try:
            fd = root.open(relative_path, os.O_RDONLY | os.O_DIRECTORY | os.O_NONBLOCK)
        except NotADirectoryError:
            raise StorageError(f"{relative_path!r} is a file, not a directory") from None
        except FileNotFoundError:
            raise StorageError(f"No such directory: {relative_path!r}") from None
        try:
            with os.scandir(fd) as scan:
                entries = [e for e in scan if not is_temp_file(e.name)]
            listing = [
                {"name": e.name, "type": kind}
                for e in entries
                if (kind := _entry_type(root, relative_path, e)) is not None
            ]
        finally:
            os.close(fd)
    listing.sort(key=lambda entry: entry["name"])
    return listing


def create_directory(project_root: Path, relative_path: str) -> None:
    """Create a directory and its parents (0755, whatever the umask); an existing directory
    is fine, a file is not."""
    with opened(project_root, relative_path) as root:
        try:
            fd = root.open(relative_path)
        except FileNotFoundError:
            fd = root.make_dirs(relative_path)
        try:
            if not stat.S_ISDIR(os.fstat(fd).st_mode):
                raise StorageError(f"{relative_path!r} exists and is a file")
        finally:
            os.close(fd)
