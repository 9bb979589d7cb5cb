"""Operations on one directory entry, a name in a directory held open; links never followed.

Copies go from a name in one open directory to a name in another (into the undo copies, back
into the root, into a scratch copy), each directory of a tree opened with O_NOFOLLOW from the
one above it, so a swap during the copy cannot lead it anywhere else.
"""

import contextlib
import os
import shutil
import stat
import uuid
from pathlib import Path
from typing import Literal

from .beneath import opened
from .paths import TEMP_PREFIX, TEMP_SUFFIX, StorageError, refuse_hard_links

# What a copy does with a file that has other hard links: the undo copies refuse it (the
# call is then refused too), a scratch copy leaves it out.
HardLinks = Literal["refuse", "skip"]

_NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC
_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW


def entry_exists(project_root: Path, relative_path: str) -> bool:
    """Whether something (even a broken link) is at the path; PathError if it is not allowed."""
    with opened(project_root, relative_path) as root:
        at = root.lookup(relative_path)
        if at is None:
            return False
        with at:
            return at.lstat() is not None


def temp_name() -> str:
    """An unused temporary name, of the kind listings leave out (is_temp_file)."""
    return f"{TEMP_PREFIX}{uuid.uuid4().hex}{TEMP_SUFFIX}"


def fsync_dir(dir_fd: int) -> None:
    """Make a rename in the directory durable; some filesystems do not support it, fine."""
    with contextlib.suppress(OSError):
        os.fsync(dir_fd)


def entry_remove(dir_fd: int, name: str) -> None:
    """Remove a file, a link (not what it points to) or a whole tree (walked by descriptors)."""
    st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(name, dir_fd=dir_fd)
    else:
        os.unlink(name, dir_fd=dir_fd)


def copy_bytes(source_fd: int, target_fd: int) -> None:
    """Copy a file's content from its current position, in the kernel."""
    while os.sendfile(target_fd, source_fd, None, 1 << 30) > 0:
        pass


def entry_copy(
    src_dir: int,
    src_name: str,
    dst_dir: int,
    dst_name: str,
    *,
    label: str,
    hard_links: HardLinks = "refuse",
    durable: bool = False,
) -> None:
    """Copy a file, a link (as a link) or a whole tree (its links as links) to a new name.

    Modes and modification times come along (the copy of a file or a directory is made
    private first, then given the original's mode). `durable`: a copied file is fsynced.
    `label` names the entry in errors.
    """
    st = os.stat(src_name, dir_fd=src_dir, follow_symlinks=False)
    if stat.S_ISLNK(st.st_mode):
        os.symlink(os.readlink(src_name, dir_fd=src_dir), dst_name, dir_fd=dst_dir)
    elif stat.S_ISDIR(st.st_mode):
        _tree_copy(src_dir, src_name, dst_dir, dst_name, label=label, hard_links=hard_links)
    elif stat.S_ISREG(st.st_mode):
        _file_copy(
            src_dir,
            src_name,
            dst_dir,
            dst_name,
            label=label,
            hard_links=hard_links,
            durable=durable,
        )
    else:
        raise StorageError(f"{label!r} is not a regular file, a directory or a link")


def _file_copy(
    src_dir: int, src_name: str, dst_dir: int, dst_name: str, *, label: str, hard_links, durable
) -> None:
    source = os.open(src_name, os.O_RDONLY | os.O_NONBLOCK | _NOFOLLOW, dir_fd=src_dir)
    try:
        st = os.fstat(source)
        if st.st_nlink > 1 and hard_links == "skip":
            return
        refuse_hard_links(st, label)
        target = os.open(
            dst_name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o600, dir_fd=dst_dir
        )
        try:
            copy_bytes(source, target)
            os.fchmod(target, stat.S_IMODE(st.st_mode) & 0o777)
            os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
            if durable:
                os.fsync(target)
        finally:
            os.close(target)
    finally:
        os.close(source)


def _tree_copy(src_dir: int, src_name: str, dst_dir: int, dst_name: str, **options) -> None:
    source = os.open(src_name, _DIRECTORY, dir_fd=src_dir)
    try:
        os.mkdir(dst_name, 0o700, dir_fd=dst_dir)
        target = os.open(dst_name, _DIRECTORY, dir_fd=dst_dir)
        try:
            tree_copy_into(source, target, **options)
            st = os.fstat(source)
            os.fchmod(target, stat.S_IMODE(st.st_mode) & 0o777)
            os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
        finally:
            os.close(target)
    finally:
        os.close(source)


def tree_copy_into(source: int, target: int, *, label: str, hard_links: HardLinks) -> None:
    """Copy everything in the open directory `source` into the open directory `target`."""
    with os.scandir(source) as scan:
        names = sorted(entry.name for entry in scan)
    for name in names:
        inner = f"{label}/{name}" if label else name
        entry_copy(source, name, target, name, label=inner, hard_links=hard_links)
