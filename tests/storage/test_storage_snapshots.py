"""Snapshots in the storage gate: a restore puts each path back by a rename, never half copied."""

import os
import shutil
from pathlib import Path

import pytest

from roject.storage import (
    StorageError,
    digests,
    project_root_create,
    snapshot_digests,
    snapshot_restore,
    snapshot_take,
)
from tests.support.storage_resolvers import RESOLVERS, resolver_use


@pytest.fixture(autouse=True, params=RESOLVERS)
def resolver(request, monkeypatch) -> str:
    """Every test here runs on openat2 and on the walk that replaces it."""
    return resolver_use(request.param, monkeypatch)


PROJECT_ID = 7


@pytest.fixture
def root() -> Path:
    return project_root_create(PROJECT_ID)


def entries(directory: Path) -> list[str]:
    """Every name under `directory`, temporary ones included, relative to it."""
    return sorted(
        str(Path(dirpath, name).relative_to(directory))
        for dirpath, dirnames, filenames in os.walk(directory)
        for name in dirnames + filenames
    )


def test_a_restored_file_is_renamed_into_place_from_a_copy_beside_it(root, monkeypatch):
    (root / "docs").mkdir()
    (root / "docs" / "a.txt").write_text("before\n")
    snapshot = snapshot_take(PROJECT_ID, root, ["docs/a.txt"])
    (root / "docs" / "a.txt").write_text("after\n")
    renames = []
    replace = os.replace

    def recording(src, dst, *, src_dir_fd=None, dst_dir_fd=None):
        # The gate renames names inside a directory it holds open; where that directory is:
        def where(fd):
            return Path(os.readlink(f"/proc/self/fd/{fd}")) if fd is not None else Path()

        renames.append((where(src_dir_fd) / src, where(dst_dir_fd) / dst))
        replace(src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd)

    monkeypatch.setattr(os, "replace", recording)
    snapshot_restore(root, snapshot)

    [(source, target)] = renames
    assert target == root / "docs" / "a.txt"
    assert source.parent == target.parent and source.name.startswith(".rojo-")
    assert source.name.endswith(".tmp")
    assert (root / "docs" / "a.txt").read_text() == "before\n"
    assert entries(root) == ["docs", "docs/a.txt"]
    assert not snapshot.directory.exists()


def test_a_restore_that_fails_while_copying_leaves_the_file_as_it_was(root, monkeypatch):
    (root / "a.txt").write_text("before\n")
    snapshot = snapshot_take(PROJECT_ID, root, ["a.txt"])
    (root / "a.txt").write_text("after\n")

    def failing_copy(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "sendfile", failing_copy)  # how the gate copies a file's bytes
    with pytest.raises(StorageError, match=r"No space left on device: 'a\.txt'"):
        snapshot_restore(root, snapshot)
    monkeypatch.undo()

    assert (root / "a.txt").read_text() == "after\n"
    assert entries(root) == ["a.txt"]  # no temporary copy left beside it
    assert snapshot_digests(snapshot) != digests(root, ["a.txt"])  # kept for another try
    snapshot_restore(root, snapshot)
    assert (root / "a.txt").read_text() == "before\n"


def test_a_restore_that_fails_while_copying_a_tree_leaves_the_directory_whole(root, monkeypatch):
    build(root, {"docs": None, "docs/a.md": "A.\n", "docs/b.md": "B.\n"})
    snapshot = snapshot_take(PROJECT_ID, root, ["docs"])
    (root / "docs" / "a.md").write_text("Changed.\n")
    (root / "docs" / "new.md").write_text("New.\n")
    sendfile = os.sendfile
    copied = []

    def failing_second_copy(out_fd, in_fd, offset, count):
        target = os.fstat(out_fd).st_ino
        if copied and target not in copied:
            raise OSError(5, "Input/output error")
        copied.append(target)
        return sendfile(out_fd, in_fd, offset, count)

    monkeypatch.setattr(os, "sendfile", failing_second_copy)
    with pytest.raises(StorageError, match="'docs'"):
        snapshot_restore(root, snapshot)
    monkeypatch.undo()

    assert copied  # the copy failed half way through the tree
    assert entries(root) == ["docs", "docs/a.md", "docs/b.md", "docs/new.md"]
    assert (root / "docs" / "a.md").read_text() == "Changed.\n"


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ({"p": "a file\n"}, {"p": None, "p/inner.txt": "inner\n"}),
        ({"p": None, "p/inner.txt": "inner\n"}, {"p": "a file\n"}),
        ({"p": None, "p/inner.txt": "old\n"}, {"p": None, "p/other.txt": "new\n"}),
        ({"p": "a file\n"}, {"p": ("->", "elsewhere")}),
        ({"p": ("->", "elsewhere")}, {"p": None}),
    ],
    ids=[
        "file where a directory is now",
        "directory where a file is now",
        "directory where a directory is now",
        "file where a link is now",
        "link where a directory is now",
    ],
)
def test_a_restore_puts_back_what_was_there_whatever_is_there_now(root, before, after):
    build(root, before)
    expected = entries(root), digests(root, ["p"])
    snapshot = snapshot_take(PROJECT_ID, root, ["p"])
    shutil.rmtree(root)
    root.mkdir()
    build(root, after)

    snapshot_restore(root, snapshot)

    assert (entries(root), digests(root, ["p"])) == expected


def build(root: Path, spec: dict) -> None:
    """Files from {path: text}, directories from {path: None}, links from {path: ("->", to)}."""
    for relative, content in spec.items():
        path = root / relative
        if content is None:
            path.mkdir()
        elif isinstance(content, tuple):
            path.symlink_to(content[1])
        else:
            path.write_text(content)
