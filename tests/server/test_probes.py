"""/healthz and /readyz: what an orchestrator asks a process, answered without a login, a Host
check or the database (for /healthz), and 503 with the failed check's name when not ready."""

import os
import sqlite3
import subprocess
import sys

import httpx2
import pytest
from django.conf import settings

from tests.support.live_server import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_ready_process_answers_both_probes_without_a_login(asgi_server):
    health = httpx2.get(asgi_server + "/healthz")
    ready = httpx2.get(asgi_server + "/readyz")

    assert (health.status_code, health.json()) == (200, {"status": "ok"})
    assert (ready.status_code, ready.json()) == (200, {"status": "ready"})
    assert health.headers["cache-control"] == "no-store"


def test_probes_answer_whatever_host_the_orchestrator_uses(asgi_server):
    """Probes reach a pod by its address: no DisallowedHost 400 for them (pages still get one)."""
    headers = {"Host": "10.1.2.3:8000"}

    assert httpx2.get(asgi_server + "/healthz", headers=headers).status_code == 200
    assert httpx2.get(asgi_server + "/readyz", headers=headers).status_code == 200
    assert httpx2.get(asgi_server + "/accounts/login/", headers=headers).status_code == 400


def test_a_probe_takes_no_writes(asgi_server):
    assert httpx2.post(asgi_server + "/readyz").status_code == 405


def test_storage_that_takes_no_files_makes_the_process_unready(server_process, tmp_path):
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("x")

    server = server_process(ROJO_STORAGE_DIR=str(blocker / "storage"))
    answer = httpx2.get(server.base_url + "/readyz", timeout=10)

    assert answer.status_code == 503
    assert answer.json()["status"] == "unavailable"
    assert [reason.split(":")[0] for reason in answer.json()["reasons"]] == ["storage"]
    assert str(blocker) not in answer.text  # no paths of the server's
    assert httpx2.get(server.base_url + "/healthz").status_code == 200


def test_an_error_the_start_finds_with_the_public_url_makes_the_process_unready(server_process):
    """ROJO_PUBLIC_URL's host missing from ALLOWED_HOSTS: the start's doctor logs that every
    request answers 400, and /readyz said ready all the same (it checked no address), so the
    proxy kept sending people to it."""
    server = server_process(ROJO_PUBLIC_URL="https://chat.example.com", ALLOWED_HOSTS="127.0.0.1")
    answer = httpx2.get(server.base_url + "/readyz", timeout=10)

    assert answer.status_code == 503
    [reason] = answer.json()["reasons"]
    assert reason.startswith("configuration: ")
    assert "allowed-hosts-url" in reason
    assert reason.endswith("(run manage.py doctor)")


def test_a_database_without_the_migrations_makes_the_process_unready(server_process, tmp_path):
    empty = tmp_path / "empty.sqlite3"
    sqlite3.connect(empty).close()

    server = server_process(DATABASE_URL=f"sqlite:///{empty}")
    answer = httpx2.get(server.base_url + "/readyz", timeout=10)

    assert answer.status_code == 503
    assert answer.json()["reasons"] == [
        "database: migrations are not applied (run manage.py migrate)"
    ]


def test_a_redis_that_does_not_answer_makes_the_process_unready(server_process):
    server = server_process(REDIS_URL="redis://127.0.0.1:9/0")
    answer = httpx2.get(server.base_url + "/readyz", timeout=10)

    assert answer.status_code == 503
    assert [reason.split(":")[0] for reason in answer.json()["reasons"]] == ["redis"]


def ready(server) -> tuple[int, list[str]]:
    answer = httpx2.get(server.base_url + "/readyz", timeout=10)
    return answer.status_code, [r.split(":")[0] for r in answer.json().get("reasons", [])]


def test_readiness_follows_the_database_and_redis_going_down_and_coming_back(
    server_process, own_postgres, own_redis
):
    """A server on a PostgreSQL and a Redis of the test's own, each stopped and started."""
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--no-input"],
        cwd=settings.BASE_DIR, check=True, capture_output=True, timeout=300,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "roject.settings",
             "DATABASE_URL": own_postgres.url, "SECRET_KEY": settings.SECRET_KEY},
    )  # fmt: skip
    server = server_process(DATABASE_URL=own_postgres.url, REDIS_URL=own_redis.url)
    assert ready(server) == (200, [])

    own_postgres.stop()
    wait_until(lambda: ready(server) == (503, ["database"]), timeout=15)
    own_postgres.start()
    wait_until(lambda: ready(server) == (200, []), timeout=30)

    own_redis.kill()
    wait_until(lambda: ready(server) == (503, ["redis"]), timeout=15)
    own_redis.start()
    wait_until(lambda: ready(server) == (200, []), timeout=30)
