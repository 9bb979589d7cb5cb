"""`manage.py serve`: what a container runs. Migrations exactly once however many start
together, the first admin, the configuration doctor's findings in the log, then one server
process that stops gracefully (roject/server/graceful.py).

One process a container, not a supervisor of several: an orchestrator then sees each
process's health, restarts it alone, and drains it alone in a rolling restart; a supervisor
inside would hide a dead process behind a live container. Scale with containers.

Containers of one release start at once against one database; each would otherwise migrate,
and two `migrate`s racing on PostgreSQL fail half-way. Here the first to take the lock migrates
and the others wait for it, then find nothing left to do.
"""

import contextlib
import fcntl
import io
import logging
import os
import secrets
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, OutputWrapper
from django.db import connection, connections, transaction

from roject.doctor import doctor_run, serving_context
from roject.server.graceful import graceful_serve

# Any fixed number: the key of the PostgreSQL advisory lock all containers take.
MIGRATION_LOCK_KEY = 0x526F6A6F  # "Rojo"

logger = logging.getLogger(__name__)


class _LoggedLines(io.TextIOBase):
    """A stream whose every line is a log record: under ROJO_LOG_FORMAT=json, what the start
    writes (the migrations, the first admin) is one JSON object a line like the rest."""

    def __init__(self, level: int) -> None:
        self.level = level
        self.pending = ""

    def write(self, text: str) -> int:
        *lines, self.pending = (self.pending + text).split("\n")
        for line in lines:
            if line.strip():
                logger.log(self.level, line)
        return len(text)

    def flush(self) -> None:
        if self.pending.strip():
            logger.log(self.level, self.pending)
        self.pending = ""


def _json_logs() -> bool:
    return os.environ.get("ROJO_LOG_FORMAT", "").strip().lower() == "json"


@contextlib.contextmanager
def migration_lock():
    """Held while migrating: a session advisory lock on PostgreSQL, a file lock on SQLite."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_lock(%s)", [MIGRATION_LOCK_KEY])
        try:
            yield
        finally:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s)", [MIGRATION_LOCK_KEY])
        return
    name = settings.DATABASES["default"]["NAME"]
    path = Path(f"{name}.migrate-lock") if connection.vendor == "sqlite" else None
    if path is None:
        yield
        return
    try:
        handle = open(path, "a")  # noqa: SIM115 (closed below, after the lock's release)
    except OSError as exc:
        raise CommandError(
            f"cannot take the migration lock {str(path)!r}: {exc.strerror}. DATABASE_URL's "
            "SQLite file must be in a directory that exists and this user may write."
        ) from None
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def admin_ensure(*, username: str, password: str) -> str | None:
    """Create the first admin if the site has no superuser; returns the password it set when it
    made one up (to be shown once), else None. An existing account is never changed."""
    users = get_user_model()
    with transaction.atomic():
        if users.objects.filter(is_superuser=True).exists():
            return None
        if users.objects.filter(username=username).exists():
            return None
        made_up = None if password else secrets.token_urlsafe(18)
        users.objects.create_superuser(username=username, email="", password=password or made_up)
        return made_up


class Command(BaseCommand):
    help = (
        "Migrate (once, under a lock), create the first admin from ROJO_ADMIN_USERNAME and "
        "ROJO_ADMIN_PASSWORD (or print a one-time password), then serve with uvicorn until "
        "SIGTERM, which lets running replies finish (ROJO_SHUTDOWN_GRACE_SECONDS)."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--no-server", action="store_true", help="Prepare the database, then exit."
        )
        parser.add_argument(
            "--no-admin",
            action="store_true",
            help="Create no first admin: another container does, with ROJO_ADMIN_PASSWORD "
            "(the compose stack's second one).",
        )

    def handle(self, *args, no_server, no_admin, **options):
        if _json_logs():
            self.stdout = OutputWrapper(_LoggedLines(logging.INFO))
        with migration_lock():
            call_command("migrate", interactive=False, verbosity=1, stdout=self.stdout)
            if os.environ.get("ROJO_COLLECT_STATIC", "").strip() in ("1", "true", "yes"):
                # For the proxy (deploy/Caddyfile); under the lock, so that containers
                # starting together never write one file at once.
                call_command("collectstatic", interactive=False, verbosity=0)
            username = os.environ.get("ROJO_ADMIN_USERNAME", "").strip() or "admin"
            made_up = None
            if not no_admin:
                made_up = admin_ensure(
                    username=username, password=os.environ.get("ROJO_ADMIN_PASSWORD", "")
                )
        if made_up:
            self.stdout.write(
                f"Created the admin {username!r} with the one-time password {made_up}\n"
                "(shown this once: log in and change it at /admin/password_change/)."
            )
        self._doctor()
        if no_server:
            return
        try:
            port = int(os.environ.get("PORT") or 8000)
        except ValueError as exc:
            raise CommandError(f"PORT: {exc}") from None
        connections.close_all()  # the server's threads open their own
        graceful_serve(
            host="0.0.0.0",
            port=port,
            forwarded_allow_ips=os.environ.get("ROJO_FORWARDED_ALLOW_IPS", "").strip(),
        )

    def _doctor(self) -> None:
        """The configuration doctor's findings, in the log at every start (its errors also
        keep /readyz at 503)."""
        context = serving_context()
        for finding in doctor_run(context=context, kinds=("settings", "runtime", "network")):
            if _json_logs():
                level = logging.ERROR if finding.level == "error" else logging.WARNING
                logger.log(level, "doctor: %s", finding.line())
            else:
                self.stderr.write(f"doctor: {finding.line()}")
        self.stdout.flush()
