"""A real small disk for the tests of a full one: a 2 MiB tmpfs mounted for the test.

The errors are then the kernel's own (ENOSPC part-way through a write), not a stand-in's.
Mounting needs root and mount(8); where either is missing, or the sandbox refuses the mount,
the test is skipped with the reason.
"""

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def small_disk_mounted(tmp_path: Path, *, inodes: int | None = None) -> Iterator[Path]:
    """A 2 MiB tmpfs at a directory of `tmp_path`, unmounted after the block; with `inodes`,
    room for that many files and directories only."""
    mount = tmp_path / "small-disk"
    mount.mkdir()
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("mounting a 2 MiB tmpfs needs root and mount(8); the disk-full tests need it")
    limit = f",nr_inodes={inodes}" if inodes else ""
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size=2m,mode=0755{limit}", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"this sandbox does not allow mounting a tmpfs: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=True)
