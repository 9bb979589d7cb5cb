"""Moving and deleting inside a project root, through the storage gate."""

import os
import shutil
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from .entries import is_present
from .paths import PathError, StorageError, reported, resolve, resolve_entry


def move_path(project_root: Path, source: str, destination: str, *, overwrite: bool) -> None:
    """Rename or move a file or directory; an existing destination only with `overwrite`."""
    src = resolve_entry(project_root, source)
    dst = resolve_entry(project_root, destination)
    with reported(source):
        if not is_present(src):
            raise StorageError(f"No such file or directory: {source!r}")
    if src == dst:
        raise StorageError("source and destination are the same path")
    if src.is_dir() and not src.is_symlink() and dst.is_relative_to(src):
        raise PathError(f"cannot move {source!r} into itself")
    with reported(destination):
        if is_present(dst):
            if not overwrite:
                raise StorageError(
                    f"{destination!r} already exists; pass overwrite: true to replace it"
                )
            replaces_directory = dst.is_dir() and not dst.is_symlink()
            if replaces_directory and (not src.is_dir() or any(dst.iterdir())):
                raise StorageError(
                    f"{destination!r} is a directory that cannot be replaced by this move"
                )
        leaving = _link_that_could_leave(project_root, src)
        if leaving is not None:
            raise PathError(
                f"cannot move {source!r}: {leaving!r} is a link that points, or could point "
                "once moved, outside the project root"
            )
        dst.parent.mkdir(parents=True, exist_ok=True)
        resolve(project_root, str(Path(destination).parent))  # still inside after mkdir
        os.replace(src, dst)


def _links_at(entry: Path) -> Iterator[Path]:
    """The entry if it is a link, else the links anywhere under it (not followed)."""
    if entry.is_symlink() or not entry.is_dir():
        yield from [entry] if entry.is_symlink() else []
        return
    for dirpath, dirnames, filenames in os.walk(entry):
        for name in dirnames + filenames:
            if (Path(dirpath) / name).is_symlink():
                yield Path(dirpath) / name


def _link_that_could_leave(project_root: Path, entry: Path) -> str | None:
    """A link at or under `entry` that leads out of the root, or could where it is moved to.

    Tools make no links; a project's files may come with some. One pointing outside is
    refused wherever it is used, but moved in place of a directory that a read has just
    checked, it would be followed: so it stays where it is. A relative target climbing with
    `..` means something else in another place. Returns the link's path in the root.
    """
    root = Path(project_root).resolve()
    for link in _links_at(entry):
        target = os.readlink(link)
        climbs = not os.path.isabs(target) and ".." in PurePosixPath(target).parts
        try:
            outside = not link.resolve().is_relative_to(root)
        except (OSError, RuntimeError):  # a loop
            outside = True
        if climbs or outside:
            return str(link.relative_to(root))
    return None


def paths_under(project_root: Path, path: str) -> list[str]:
    """A path and, for a directory, everything in it: what deleting it would remove."""
    target = resolve_entry(project_root, path)
    root = Path(project_root).resolve()
    with reported(path):
        if not is_present(target):
            raise StorageError(f"No such file or directory: {path!r}")
        if target.is_symlink() or not target.is_dir():
            return [path]
        inside = [
            str((Path(dirpath) / name).relative_to(root))
            for dirpath, dirnames, filenames in os.walk(target)
            for name in dirnames + filenames
        ]
    return [*sorted(inside), path]


def delete_path(project_root: Path, path: str, *, recursive: bool) -> list[str]:
    """Delete a file, a link or an empty directory (a full one only with `recursive`).

    Returns the relative paths removed, so the caller can say what went.
    """
    removed = paths_under(project_root, path)
    target = resolve_entry(project_root, path)
    with reported(path):
        if target.is_symlink() or not target.is_dir():
            target.unlink()
            return removed
        if len(removed) > 1 and not recursive:
            raise StorageError(
                f"{path!r} is a directory with {len(removed) - 1} entries; "
                "pass recursive: true to delete it with everything in it"
            )
        shutil.rmtree(target)
        return removed
