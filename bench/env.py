"""The benchmark's world: a scratch database and storage dir, the app's settings, and fixtures.

The benchmarking process and the server it starts share one environment: a fresh SQLite file
and storage directory in a temporary directory, production settings (DEBUG off, so Django
keeps no query log) with the per-user limits turned off.
"""

import contextlib
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
USERNAME = "bench"


def bench_environ(scratch: Path) -> dict[str, str]:
    """Environment variables for every process of the run."""
    return {
        "DJANGO_SETTINGS_MODULE": "roject.settings",
        "DEBUG": "0",
        "SECRET_KEY": "bench-only-not-a-secret-" + "x" * 40,
        "SECURE_SSL_REDIRECT": "0",
        "SESSION_COOKIE_SECURE": "0",
        "CSRF_COOKIE_SECURE": "0",
        # SQLite, but for the scale-out run on PostgreSQL (bench/scale_out.py).
        "DATABASE_URL": os.environ.get("BENCH_DATABASE_URL")
        or f"sqlite:///{scratch / 'bench.sqlite3'}",
        "ROJO_STORAGE_DIR": str(scratch / "storage"),
        "ROJO_USER_MESSAGES_PER_MINUTE": "0",
        "ROJO_USER_CONCURRENT_TURNS": "0",
        "ROJO_PROVIDER_RETRIES": "0",
        "ROJO_LOG_LEVEL": "WARNING",
        "PYTHONPATH": str(ROOT),
    }


@dataclass
class Fixtures:
    """What the benchmarks log in as and chat with."""

    user_id: int
    session_key: str
    csrf_token: str


def setup(scratch: Path) -> None:
    """Point this process at the scratch world, set Django up and migrate the database."""
    os.environ.update(bench_environ(scratch))
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", interactive=False, verbosity=0)  # in process: 2.5 s less


def scratch_dir() -> Path:
    return Path(tempfile.mkdtemp(prefix="rojo-bench-"))


def fixtures_create() -> Fixtures:
    """A user with a logged-in session and a CSRF token, as a browser would hold them."""
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.middleware.csrf import _get_new_csrf_string
    from django.test import Client

    user = get_user_model().objects.create_user(username=USERNAME, password="bench-pw-1")
    client = Client()
    client.force_login(user)
    return Fixtures(
        user_id=user.pk,
        session_key=client.cookies[settings.SESSION_COOKIE_NAME].value,
        csrf_token=_get_new_csrf_string(),
    )


def project_new(name: str):
    """A project owned by the bench user, with its empty file root.

    Its storage is as after its first recorded change (the change lock's file and the undo
    directory exist): made once in a project's life, they are not a conversation's cost.
    """
    import os

    from django.contrib.auth import get_user_model

    from roject import storage
    from roject.members.projects import project_create

    project = project_create(name=name, owner=get_user_model().objects.get(username=USERNAME))
    os.close(storage.change_lock_open(project.pk))
    storage.undo_dir(project.pk, "0" * 32).parent.mkdir()
    return project


def rojo_new(slug: str, base_url: str, model: str, **fields):
    """A rojo on the bench provider; `model` names the provider's scenario."""
    from rojos.models import Rojo

    return Rojo.objects.create(
        name=slug, slug=slug, base_url=base_url, model=model, api_key="bench-key", **fields
    )


@contextlib.contextmanager
def standalone_world():
    """A fresh world for one section run by hand (`python -m bench.<section>`): scratch
    dir, settings, fixtures and a fake provider; (environ, provider, scratch, fixtures).
    On a failure the servers' logs are printed; everything is removed at the end."""
    import shutil

    from .provider import provider_start

    scratch = scratch_dir()
    setup(scratch)
    environ = bench_environ(scratch)
    provider = provider_start(environ)
    try:
        yield environ, provider, scratch, fixtures_create()
    except BaseException:
        for log in scratch.glob("*.log"):
            print(f"{log.name}:\n{log.read_text()[-3000:]}")
        raise
    finally:
        provider.stop()
        shutil.rmtree(scratch, ignore_errors=True)
