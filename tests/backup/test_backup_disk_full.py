"""A disk that fills during a backup or a restore: a clear one-line error and a non-zero exit,
nothing half written left behind, and the installation as it was.

The disks are real 2 MiB filesystems (a tmpfs mounted for the test): the errors are the
kernel's ENOSPC. The commands run as `manage.py` processes, as an operator runs them.
"""

import os
import subprocess
import sys

import pytest
from django.conf import settings

from roject.storage import project_root
from tests.support.server_process import database_url
from tests.support.small_disk import small_disk_mounted

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.backend]

BIG = os.urandom(3 << 20)  # does not compress: more than the disk holds


@pytest.fixture
def small_disk(tmp_path):
    """A 2 MiB tmpfs of its own, unmounted after the test."""
    with small_disk_mounted(tmp_path) as mount:
        yield mount


def manage(*args: str, storage) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "roject.settings",
        "SECRET_KEY": settings.SECRET_KEY,
        "DATABASE_URL": database_url(),
        "ROJO_STORAGE_DIR": str(storage),
    }
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=settings.BASE_DIR, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def test_a_backup_onto_a_full_disk_says_so_in_one_line_and_leaves_nothing(
    users, project, storage_dir, small_disk
):
    (project_root(project.pk) / "big.bin").write_bytes(BIG)

    for name in ("rojo.tar", "rojo.tar.gz"):
        run = manage("backup", str(small_disk / name), storage=storage_dir)

        assert run.returncode == 1
        assert run.stderr.strip().splitlines() == [
            "CommandError: backup failed: [Errno 28] No space left on device"
        ]  # no traceback of the archive's streams after it
        assert list(small_disk.iterdir()) == []  # no partial archive


def test_a_restore_onto_a_full_disk_is_refused_and_restores_nothing(
    users, project, storage_dir, small_disk, tmp_path, other_installation
):
    (project_root(project.pk) / "big.bin").write_bytes(BIG)
    archive = tmp_path / "rojo.tar"
    assert manage("backup", str(archive), storage=storage_dir).returncode == 0
    other_installation.storage_dir = small_disk / "storage"
    other_installation.storage_dir.mkdir()

    run = other_installation.manage("restore", str(archive), check=False)

    assert run.returncode == 1
    assert run.stderr.strip().splitlines() == [
        "CommandError: restore refused: [Errno 28] No space left on device; nothing was restored"
    ]
    assert list(other_installation.storage_dir.iterdir()) == []  # no staging left
    assert other_installation.query("SELECT COUNT(*) FROM auth_user") == [(0,)]
