"""Moving and deleting inside a project root, on the entries' directories held open."""

import os
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from .beneath import At, Root, opened
from .paths import PathError, StorageError, check_form, refuse_hard_links, reported

_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _present(at: At, label: str) -> os.stat_result:
    st = at.lstat()
    if st is None:
        raise StorageError(f"No such file or directory: {label!r}")
    return st


def _under(
    at: At, st: os.stat_result, label: str
) -> Iterator[tuple[str, int, str, os.stat_result]]:
    """The entry and, for a directory, everything in it (links not followed), each as
    (its path in the root, its directory's descriptor, its name, its lstat)."""
    yield label, at.dir_fd, at.name, st
    if not stat.S_ISDIR(st.st_mode):
        return
    top = os.open(at.name, _DIRECTORY, dir_fd=at.dir_fd)
    try:
        # fwalk opens each directory from its parent's descriptor and does not follow links.
        for dirpath, dirnames, filenames, dir_fd in os.fwalk(".", dir_fd=top):
            for name in dirnames + filenames:
                try:
                    inner = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
                except FileNotFoundError:
                    continue
                yield str(PurePosixPath(label, dirpath, name)), dir_fd, name, inner
    finally:
        os.close(top)


def move_path(project_root: Path, source: str, destination: str, *, overwrite: bool) -> None:
    """Rename or move a file or directory; an existing destination only with `overwrite`.

    The destination's directory may not exist yet: what exists of it is opened and checked,
    and the rest made from there once every check passed, so the rename lands where the
    checks looked.
    """
    check_form(destination)
    with opened(project_root, source) as root, root.entry(source) as src:
        dst = PurePosixPath(destination.rstrip("/"))
        with reported(destination):
            if dst.name in ("", ".", ".."):
                raise PathError(f"path {destination!r} does not name a file or directory")
            place, missing = root.existing_part(str(dst.parent), label=destination)
        try:
            src_st = _present(src, source)
            _check_move(root, src, src_st, source, place, missing, dst.name, destination, overwrite)
        except BaseException:
            os.close(place)
            raise
        with reported(destination):
            target = root.make_missing(place, missing)
            try:
                os.replace(src.name, dst.name, src_dir_fd=src.dir_fd, dst_dir_fd=target)
            finally:
                os.close(target)


def _check_move(
    root: Root,
    src: At,
    src_st: os.stat_result,
    source: str,
    place: int,
    missing: list[str],
    name: str,
    destination: str,
    overwrite: bool,
) -> None:
    """Refuse a move onto itself, into itself, over what it may not replace, of a file with
    other hard links, or of a link that could lead out of the root. `place`: the deepest
    existing directory of the destination, `missing` the directories still to make in it."""
    dst = None if missing else At(place, name)
    if dst is not None and src.name == name and _same_file(src.dir_fd, place):
        raise StorageError("source and destination are the same path")
    moves_directory = stat.S_ISDIR(src_st.st_mode)
    if moves_directory and root.contains(place, src_st):
        raise PathError(f"cannot move {source!r} into itself")
    with reported(destination):
        dst_st = dst.lstat() if dst is not None else None
        if dst_st is not None:
            if not overwrite:
                raise StorageError(
                    f"{destination!r} already exists; pass overwrite: true to replace it"
                )
            if stat.S_ISDIR(dst_st.st_mode) and (not moves_directory or _has_entries(dst)):
                raise StorageError(
                    f"{destination!r} is a directory that cannot be replaced by this move"
                )
            refuse_hard_links(dst_st, destination)
    for label, dir_fd, entry, st in _under(src, src_st, source):
        refuse_hard_links(st, label)
        if stat.S_ISLNK(st.st_mode) and _could_leave(root, label, dir_fd, entry):
            raise PathError(
                f"cannot move {source!r}: {label!r} is a link that points, or could point "
                "once moved, outside the project root"
            )


def _same_file(a: int, b: int) -> bool:
    return os.path.samestat(os.fstat(a), os.fstat(b))


def _has_entries(at: At) -> bool:
    fd = os.open(at.name, _DIRECTORY, dir_fd=at.dir_fd)
    try:
        with os.scandir(fd) as scan:
            return any(True for _ in scan)
    finally:
        os.close(fd)


def _could_leave(root: Root, label: str, dir_fd: int, name: str) -> bool:
    """Whether a link leads out of the root, or could where it is moved to.

    Tools make no links; a project's files may come with some. One pointing outside is
    refused wherever it is used; one whose relative target climbs with `..` means something
    else in another place. Either stays where it is.
    """
    target = os.readlink(name, dir_fd=dir_fd)
    if not target.startswith("/") and ".." in PurePosixPath(target).parts:
        return True
    try:
        os.close(root.open(label))
    except PathError:
        return True
    except OSError:  # a broken link inside the root
        return False
    return False


def paths_under(project_root: Path, path: str) -> list[str]:
    """A path and, for a directory, everything in it: what deleting it would remove."""
    with opened(project_root, path) as root, root.entry(path) as at:
        st = _present(at, path)
        inside = [label for label, *_ in _under(at, st, path)][1:]
    return [*sorted(inside), path]


def delete_path(project_root: Path, path: str, *, recursive: bool) -> list[str]:
    """Delete a file, a link or an empty directory (a full one only with `recursive`).

    A directory is removed by descriptors from its parent down, never following a link.
    A file with other hard links, or a directory holding one, is refused: its undo copy
    would be a copy of what may be a file outside the project. Returns the relative paths
    removed, so the caller can say what went.
    """
    with opened(project_root, path) as root, root.entry(path) as at:
        st = _present(at, path)
        under = []
        for label, _, _, inner in _under(at, st, path):
            refuse_hard_links(inner, label)
            under.append(label)
        removed = [*sorted(under[1:]), path]
        if not stat.S_ISDIR(st.st_mode):
            os.unlink(at.name, dir_fd=at.dir_fd)
            return removed
        if len(removed) > 1 and not recursive:
            raise StorageError(
                f"{path!r} is a directory with {len(removed) - 1} entries; "
                "pass recursive: true to delete it with everything in it"
            )
        shutil.rmtree(at.name, dir_fd=at.dir_fd)
        return removed
