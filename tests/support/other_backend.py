"""A second, empty installation on the other database backend, driven by `manage.py`.

The test's own database is SQLite (the default run) or PostgreSQL (CI's `-m backend` run);
the other one is then a PostgreSQL database of the test's own at 127.0.0.1:5432 (made with
CREATE DATABASE, dropped after), or a SQLite file. Its commands run as processes of their
own, with its DATABASE_URL and storage directory, as an operator would run them. Where
PostgreSQL does not answer the tests that need it are skipped, but not in CI, where it is
there.
"""

import os
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.db import connection

POSTGRES = "postgres://postgres@127.0.0.1:5432"


@dataclass
class OtherInstallation:
    vendor: str
    database_url: str
    storage_dir: Path

    def manage(
        self, *args: str, check: bool = True, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess:
        """Run `manage.py <args>` on this installation (`env`: settings of its own, such as
        another SECRET_KEY)."""
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "roject.settings",
            "SECRET_KEY": django_settings.SECRET_KEY,
            "DATABASE_URL": self.database_url,
            "ROJO_STORAGE_DIR": str(self.storage_dir),
            **(env or {}),
        }
        run = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=django_settings.BASE_DIR,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        if check and run.returncode != 0:
            raise AssertionError(f"manage.py {' '.join(args)} failed:\n{run.stdout}{run.stderr}")
        return run

    def python(self, code: str) -> str:
        """What `code` printed, run by `manage.py shell` on this installation."""
        return self.manage("shell", "--no-imports", "-c", code).stdout

    def query(self, sql: str, params: tuple = ()) -> list[tuple]:
        """Rows of a query on this installation's database, read directly."""
        if self.vendor == "sqlite":
            with sqlite3.connect(self.database_url.removeprefix("sqlite:///")) as db:
                return list(db.execute(sql.replace("%s", "?"), params))
        import psycopg

        with psycopg.connect(self.database_url) as db:
            return list(db.execute(sql, params))


def _postgres_database() -> Iterator[str]:
    import psycopg

    name = f"rojo_backup_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    try:
        admin = psycopg.connect(f"{POSTGRES}/postgres", autocommit=True, connect_timeout=3)
    except psycopg.OperationalError as exc:
        if os.environ.get("CI"):
            raise
        pytest.skip(
            f"PostgreSQL does not answer at {POSTGRES} ({exc}): the cross-backend test needs it"
        )
    with admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"{POSTGRES}/{name}"
    finally:
        with psycopg.connect(f"{POSTGRES}/postgres", autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def other_installation(tmp_path) -> Iterator[OtherInstallation]:
    """An empty, migrated installation on the backend the test's database is not."""
    storage = tmp_path / "other-storage"
    storage.mkdir()
    if connection.vendor == "postgresql":
        url = f"sqlite:///{tmp_path / 'other.sqlite3'}"
        other = OtherInstallation(vendor="sqlite", database_url=url, storage_dir=storage)
        other.manage("migrate", "--no-input", "-v", "0")
        yield other
        return
    databases = _postgres_database()
    url = next(databases)
    try:
        other = OtherInstallation(vendor="postgresql", database_url=url, storage_dir=storage)
        other.manage("migrate", "--no-input", "-v", "0")
        yield other
    finally:
        databases.close()
