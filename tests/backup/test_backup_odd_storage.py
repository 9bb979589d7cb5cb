"""What someone with a shell may leave in a project's storage is backed up and restored as it
is: names that are no UTF-8, names of 255 bytes, empty files, files nobody may read, a link
pointing out (kept as a link, never followed), and a tree deeper than PATH_MAX (4096 bytes),
which a restore writes one directory at a time, never by its whole path.

The archive is restored by `manage.py restore` on the other installation, a process of its
own, as an operator would run it.
"""

import io
import os

import pytest
from django.core.management import call_command

from roject.storage import project_root

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.backend]

DEPTH = 20  # directories of 250 bytes: a path of some 5,000 bytes
NON_UTF8 = b"caf\xe9-\xff.txt"
LONG = "n" * 255


def deep_names() -> list[str]:
    return [f"d{level:02d}" + "x" * 247 for level in range(DEPTH)]


def odd_storage_make(root) -> None:
    top = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with open(os.path.join(os.fsencode(root), NON_UTF8), "wb") as handle:
            handle.write(b"latin-1 name\n")
        (root / LONG).write_bytes(b"a name of 255 bytes\n")
        (root / "empty.txt").write_bytes(b"")
        (root / "locked.txt").write_bytes(b"nobody may read this\n")
        os.chmod(root / "locked.txt", 0)
        os.symlink("/etc/hostname", root / "out")
        fd = os.dup(top)
        for name in ["deep", *deep_names()]:
            os.mkdir(name, dir_fd=fd)
            inner = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = inner
        leaf = os.open("leaf.txt", os.O_WRONLY | os.O_CREAT, 0o640, dir_fd=fd)
        os.write(leaf, b"at the bottom\n")
        os.close(leaf)
        os.close(fd)
    finally:
        os.close(top)


def deep_leaf(root) -> tuple[bytes, int]:
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    for name in ["deep", *deep_names()]:
        inner = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = inner
    try:
        leaf = os.open("leaf.txt", os.O_RDONLY, dir_fd=fd)
        with os.fdopen(leaf, "rb") as handle:
            return handle.read(), os.stat(leaf).st_mode & 0o777
    finally:
        os.close(fd)


def test_odd_names_and_a_tree_deeper_than_path_max_restore_as_they_were(
    users, project, tmp_path, other_installation
):
    root = project_root(project.pk)
    odd_storage_make(root)
    archive = tmp_path / "odd.tar.gz"
    call_command("backup", str(archive), stdout=io.StringIO())
    other_installation.manage("verify-backup", str(archive))

    restored = other_installation.manage("restore", str(archive), check=False)

    assert restored.returncode == 0, restored.stderr
    there = other_installation.storage_dir / str(project.pk) / "root"
    with open(os.path.join(os.fsencode(there), NON_UTF8), "rb") as handle:
        assert handle.read() == b"latin-1 name\n"
    assert (there / LONG).read_bytes() == b"a name of 255 bytes\n"
    assert (there / "empty.txt").read_bytes() == b""
    assert os.stat(there / "locked.txt").st_mode & 0o777 == 0
    assert os.readlink(there / "out") == "/etc/hostname"
    assert deep_leaf(there) == (b"at the bottom\n", 0o640)
