"""What a path from a model may be, and where it leads inside a project root, by name.

Paths come from a model and are untrusted. They are always relative to the project root and
never reach anything outside it, whatever `..`, absolute paths, symlinks or NUL bytes they try.
Error messages name only the relative path the caller gave, never a server path.

`resolve` answers where a path leads now, by name: for naming things (which path a write
through a link changes). It is no way to operate on a path, which another thread could swap
meanwhile: the operations resolve and act on the same descriptors (`beneath`).
"""

import contextlib
import errno
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from ..errors import AppError

_DRIVE = re.compile(r"^[A-Za-z]:")

# An atomic write's (or restore's) temporary entry, next to its target until the rename.
TEMP_PREFIX, TEMP_SUFFIX = ".rojo-", ".tmp"


class StorageError(AppError):
    """A file operation failed in a way the caller should report, not crash on."""


class PathError(StorageError):
    """A path that is not allowed: outside the root, absolute, or malformed."""


class EntryExists(StorageError):
    """The path is taken, and replacing it was not asked for."""


class TooLarge(StorageError):
    """What was sent is over a size limit."""


class DiskFull(StorageError):
    """The storage has no room for what an operation would write (or was writing)."""


# A full disk or an exhausted quota: both mean there is no room.
_NO_ROOM = {errno.ENOSPC, errno.EDQUOT}


def no_room(exc: BaseException) -> bool:
    """Whether an error is a full disk's (or an exhausted quota's)."""
    return isinstance(exc, OSError) and exc.errno in _NO_ROOM


def disk_full(label: str) -> DiskFull:
    """The one error a full disk gives, whether found out by a write or foreseen by a check."""
    return DiskFull(
        f"No space left on device: {label!r} (the server's storage is full; nothing was changed)"
    )


# The longest path and the deepest one the gate accepts: deep enough for any real project,
# shallow enough that the recursive walks (os.fwalk, shutil.rmtree, snapshot copies) of
# what it made never hit Python's recursion limit.
MAX_PATH_CHARS = 1024
MAX_PATH_PARTS = 64


def check_form(relative_path: str) -> None:
    """Refuse what is never a relative path: non-strings, NUL bytes, backslashes, absolutes,
    and paths over MAX_PATH_CHARS characters or MAX_PATH_PARTS names deep."""
    if not isinstance(relative_path, str):
        raise PathError("path must be a string")
    if len(relative_path) > MAX_PATH_CHARS:
        raise PathError(
            f"path {relative_path[:60]!r}… is {len(relative_path):,} characters long, "
            f"over the limit of {MAX_PATH_CHARS:,}"
        )
    depth = sum(1 for part in relative_path.split("/") if part not in ("", "."))
    if depth > MAX_PATH_PARTS:
        raise PathError(
            f"path {relative_path[:60]!r}… is {depth} names deep, over the limit of "
            f"{MAX_PATH_PARTS}"
        )
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
    check_form(relative_path)
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
    check_form(relative_path)
    pure = PurePosixPath(relative_path.rstrip("/"))
    if pure.name in ("", ".", ".."):
        raise PathError(f"path {relative_path!r} does not name a file or directory")
    try:
        parent = resolve(project_root, str(pure.parent))
    except PathError:
        resolve(project_root, relative_path)  # to name the whole path in the message
        raise
    return parent / pure.name


def resolved_relative(project_root: Path, relative_path: str) -> PurePosixPath:
    """The path relative to the root after following its links (which stay inside)."""
    return PurePosixPath(resolve(project_root, relative_path).relative_to(project_root.resolve()))


@contextlib.contextmanager
def reported(relative_path: str) -> Iterator[None]:
    """Turn an OSError into a StorageError that names the relative path only."""
    try:
        yield
    except OSError as exc:
        if no_room(exc):
            raise disk_full(relative_path) from exc
        reason = exc.strerror or exc.__class__.__name__
        raise StorageError(f"{reason}: {relative_path!r}") from exc


def link_read(dir_fd: int, name: str) -> str | None:
    """A link's target; None when the name is no longer a link (EINVAL), which a swap
    between the look that found a link and this read makes happen."""
    try:
        return os.readlink(name, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.EINVAL:
            return None
        raise


def is_temp_file(name: str) -> bool:
    """Temporary files of an atomic write in progress are not part of the project."""
    return name.startswith(TEMP_PREFIX) and name.endswith(TEMP_SUFFIX)


def refuse_hard_links(st: os.stat_result, label: str) -> None:
    """A regular file with other hard links may be a window onto a file outside the project."""
    if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
        raise StorageError(
            f"{label!r} has other hard links, so it may also be a file outside the project; "
            "it is not read or changed here (a copy of it, made by a person, would be)"
        )
