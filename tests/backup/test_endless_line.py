"""A compressed archive of one endless line is refused, not read into memory.

A database part is read line by line, a line a row. A few megabytes of gzip can hold a
gigabyte-long line: `verify-backup` and `restore` held it whole and died of a MemoryError
(or took the host's memory). They now refuse a line longer than any row a backup writes
(ROW_BYTES) as the archive damaged or not a backup, and restore nothing.
"""

import gzip
import io
import json
import os
import resource
import subprocess
import sys
import tarfile

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection

from roject.backup.archive import ROW_BYTES
from roject.backup.manifest import header_make
from tests.support.server_process import database_url

# Not run again on PostgreSQL: the bound is in the archive reader, before any database, and
# the test makes and reads 272 MiB twice.
pytestmark = pytest.mark.django_db(transaction=True)

# The commands' address space: room for Django and a row of ROW_BYTES. The line is just over
# ROW_BYTES (a gigabyte took the old reader to a MemoryError; the message below is what tells
# the bound held, and a line this long takes a fifth of the time to make and read).
MEMORY_BYTES = 1 << 30
LINE_BYTES = ROW_BYTES + (16 << 20)


class _Endless(io.RawIOBase):
    """`size` bytes of one line, made as they are read."""

    def __init__(self, size: int) -> None:
        self.left = size

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        count = min(len(buffer), self.left)
        buffer[:count] = b"a" * count
        self.left -= count
        return count


def endless_line_archive(path) -> None:
    """A real header, then a database part of one line of LINE_BYTES, gzipped."""
    header = json.dumps(header_make(connection, storage="none", projects=[])).encode()
    with (
        path.open("wb") as out,
        gzip.GzipFile(fileobj=out, mode="wb", compresslevel=1) as compressed,
        tarfile.open(fileobj=compressed, mode="w|", format=tarfile.PAX_FORMAT) as tar,
    ):
        info = tarfile.TarInfo("rojo-backup/header.json")
        info.size = len(header)
        tar.addfile(info, io.BytesIO(header))
        info = tarfile.TarInfo("database/0001-auth.user.jsonl")
        info.size = LINE_BYTES
        tar.addfile(info, io.BufferedReader(_Endless(LINE_BYTES), 1 << 20))


def _bounded() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))


def command_run(*args: str) -> subprocess.CompletedProcess:
    """manage.py run as an operator runs it, on the test database, in MEMORY_BYTES."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "roject.settings",
        "SECRET_KEY": settings.SECRET_KEY,
        "DATABASE_URL": database_url(),
        "ROJO_STORAGE_DIR": str(settings.ROJO_STORAGE_DIR),
    }
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=settings.BASE_DIR, env=env, capture_output=True, text=True, timeout=300,
        preexec_fn=_bounded,
    )  # fmt: skip


def test_a_line_longer_than_any_row_is_refused_as_damaged_not_held(storage_dir, tmp_path):
    path = tmp_path / "endless.tar.gz"
    endless_line_archive(path)
    assert path.stat().st_size < 16 << 20  # a small file, 272 MiB inside

    checked = command_run("verify-backup", str(path))
    restoring = command_run("restore", str(path))

    line = (
        f"holds a line longer than any row ({ROW_BYTES >> 20} MiB): it is damaged or not a backup"
    )
    assert checked.returncode == 1, checked.stderr
    assert "is not a sound backup" in checked.stderr and line in checked.stderr, checked.stderr
    assert "Traceback" not in checked.stderr
    assert restoring.returncode == 1, restoring.stderr
    assert "nothing was restored" in restoring.stderr and line in restoring.stderr
    assert "Traceback" not in restoring.stderr
    assert not get_user_model().objects.exists()
    assert list(storage_dir.iterdir()) == []
