"""DATABASE_URL as Django's DATABASES: SQLite (the default file) or PostgreSQL, each with the
options the app's database threads need; another database, or a URL that is none, stops the
start with what to set."""

import os
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from .environment import env_float, env_int


def databases(base_dir: Path) -> dict:
    """DATABASES from DATABASE_URL (unset: the SQLite file db.sqlite3 in `base_dir`)."""
    try:
        default = dj_database_url.parse(
            os.environ.get("DATABASE_URL") or f"sqlite:///{base_dir / 'db.sqlite3'}",
            conn_max_age=0,
            conn_health_checks=True,
        )
    except ValueError as exc:  # the URL itself is not repeated: it may hold a password
        raise ImproperlyConfigured(
            f"DATABASE_URL is not a database URL: {str(exc).split('. ')[0].rstrip('.')}. Set "
            "it to postgres://user:password@host:5432/name (special characters in the "
            "password percent-encoded), or unset it for the SQLite file db.sqlite3."
        ) from None
    if default["ENGINE"] not in {"django.db.backends.sqlite3", "django.db.backends.postgresql"}:
        # Django's own error for mysql:// asked to install mysqlclient, which would not help:
        # the search, the locks and the backups are written for these two.
        scheme = os.environ["DATABASE_URL"].split("://", 1)[0]
        raise ImproperlyConfigured(
            f"DATABASE_URL: Rojo runs on PostgreSQL or SQLite, not {scheme}://. Set it to "
            "postgres://user:password@host:5432/name, or unset it for the SQLite file "
            "db.sqlite3."
        )
    if default["ENGINE"] == "django.db.backends.sqlite3":
        # WAL and immediate transactions let the streaming turn and page requests share the
        # file; the writers of a process take turns in order (see roject/sqlite_backend). Each
        # database thread keeps its connection for the life of the process
        # (roject/server/db_threads.py).
        default["ENGINE"] = "roject.server.sqlite_backend"
        default["CONN_MAX_AGE"] = None
        # A page cache of 512 KiB a connection, not 2 MiB: each long reply written fills it,
        # and the connections live as long as the process (docs/performance.md, section 8).
        default["OPTIONS"] = {
            "timeout": 20,
            "transaction_mode": "IMMEDIATE",
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; "
            "PRAGMA cache_size=-512;",
        }
    if default["ENGINE"].startswith("django.db.backends.postgresql"):
        # A pool of connections per process, each lent for one trip to the database and given
        # back after it (roject/server/db_threads.py): a streaming reply holds none, so the
        # connections PostgreSQL allows bound the database trips at once, not the replies. A
        # trip waits up to ROJO_DB_POOL_TIMEOUT seconds for a connection; while the database
        # is out of reach, each try of a turn's retried writes (ROJO_DB_RETRY_SECONDS) waits
        # that long.
        default.setdefault("OPTIONS", {})["pool"] = {
            "min_size": 1,
            "max_size": env_int("ROJO_DB_POOL_SIZE", 10, positive=True),
            "timeout": env_float("ROJO_DB_POOL_TIMEOUT", 20, positive=True),
        }
    return {"default": default}
