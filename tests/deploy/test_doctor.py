"""`manage.py doctor`, run as an operator runs it, against seeded misconfigurations: each is
found, named by its code, with a fix; a sound deployment gets nothing and exit status 0."""

import os
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings as django_settings

from rojos.models import Rojo
from tests.support.helpers import make_rojo
from tests.support.server_process import database_url

pytestmark = pytest.mark.django_db(transaction=True)

URL = "https://chat.example.com"
SOUND = {
    "SECRET_KEY": "a-sound-key-" + "0123456789abcdef" * 4,
    "DEBUG": "0",
    "ALLOWED_HOSTS": "chat.example.com",
    "SECURE_PROXY_SSL_HEADER": "1",
    "ROJO_PROXY_COUNT": "1",
    "ROJO_PROCESSES": "1",
    "REDIS_URL": "",
}


def closed_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def doctor(storage_dir: Path, *args: str, **env: str) -> tuple[int, str]:
    full = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("ROJO_", "SECURE_"))},
        "DJANGO_SETTINGS_MODULE": "roject.settings",
        "DATABASE_URL": database_url(),
        "ROJO_STORAGE_DIR": str(storage_dir),
        **SOUND,
        **env,
    }
    command = [sys.executable, "manage.py", "doctor", "--url", URL, *args]
    done = subprocess.run(
        command, cwd=django_settings.BASE_DIR, env=full, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, done.stdout


def codes(output: str) -> set[str]:
    return {line.split()[1].rstrip(":") for line in output.splitlines() if line[:1] in "EW"}


def test_a_sound_deployment_gets_nothing_and_status_0(storage_dir):
    status, output = doctor(storage_dir, "--no-network")

    assert (status, output.strip()) == (0, "ok      nothing found.")


SEEDED = [
    ("secret-key-weak", {"SECRET_KEY": "short"}, ()),
    ("debug-on", {"DEBUG": "1"}, ()),
    ("allowed-hosts-any", {"ALLOWED_HOSTS": "*"}, ()),
    ("allowed-hosts-url", {"ALLOWED_HOSTS": "other.example.com"}, ()),
    ("csrf-origin", {"SECURE_PROXY_SSL_HEADER": "0", "ROJO_PROXY_COUNT": "0"}, ()),
    ("cookies-not-secure", {"SESSION_COOKIE_SECURE": "0"}, ()),
    ("hsts-off", {"SECURE_HSTS_SECONDS": "0"}, ()),
    ("proxy-count", {"ROJO_PROXY_COUNT": "0"}, ()),
    ("plain-http", {}, ("--url", "http://chat.example.com")),
    ("url-not-http", {}, ("--url", "chat.example.com")),
    ("processes-without-redis", {"ROJO_PROCESSES": "2"}, ()),
    ("processes-without-redis", {}, ("--processes", "4")),
    ("turn-stale-age", {"ROJO_TURN_STALE_SECONDS": "2"}, ()),
    ("turn-stale-age", {"ROJO_TURN_HEARTBEAT_SECONDS": "5"}, ()),
]


@pytest.mark.parametrize(("code", "env", "args"), SEEDED, ids=[case[0] for case in SEEDED])
def test_each_seeded_misconfiguration_is_found_with_its_fix(storage_dir, code, env, args):
    status, output = doctor(storage_dir, "--no-network", *args, **env)

    # DEBUG also turns off the HTTPS defaults, which is found as well.
    consequences = {"cookies-not-secure", "hsts-off"} if code == "debug-on" else set()
    assert codes(output) - {"processes-on-sqlite"} == {code} | consequences, output
    line = next(line for line in output.splitlines() if f" {code}:" in line)
    assert " Fix: " in line
    assert status == (2 if output.startswith("ERROR") else 1)


def test_without_url_the_doctor_checks_the_public_url_the_start_checks(storage_dir):
    """`podman exec app1 python manage.py doctor`, as an operator asks a container: the start's
    doctor had logged that ROJO_PUBLIC_URL's host answers 400, and this said nothing found."""
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("ROJO_", "SECURE_"))},
        "DJANGO_SETTINGS_MODULE": "roject.settings",
        "DATABASE_URL": database_url(),
        "ROJO_STORAGE_DIR": str(storage_dir),
        **SOUND,
        "ROJO_PUBLIC_URL": URL,
        "ALLOWED_HOSTS": "other.example.com",
    }
    done = subprocess.run(
        [sys.executable, "manage.py", "doctor", "--no-network"], cwd=django_settings.BASE_DIR,
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip

    assert codes(done.stdout) == {"allowed-hosts-url"}, done.stdout + done.stderr
    assert done.returncode == 2


FIXES = [
    ({"DEBUG": "1"}, "cookies-not-secure", "remove DEBUG from the environment (or set DEBUG=0)"),
    ({"DEBUG": "1"}, "hsts-off", "remove DEBUG from the environment (or set DEBUG=0)"),
    ({"SESSION_COOKIE_SECURE": "0"}, "cookies-not-secure", "remove SESSION_COOKIE_SECURE=0 ("),
    ({"CSRF_COOKIE_SECURE": "no"}, "cookies-not-secure", "remove CSRF_COOKIE_SECURE=no ("),
    (
        {"DEBUG": "1", "SESSION_COOKIE_SECURE": "0"},
        "cookies-not-secure",
        "remove SESSION_COOKIE_SECURE=0, and DEBUG from the environment",
    ),
    ({"SECURE_HSTS_SECONDS": "0"}, "hsts-off", "remove SECURE_HSTS_SECONDS=0 ("),
]


@pytest.mark.parametrize(
    ("env", "code", "fix"), FIXES, ids=[f"{'+'.join(case[0])}:{case[1]}" for case in FIXES]
)
def test_an_https_setting_turned_off_is_fixed_where_it_was_turned_off(storage_dir, env, code, fix):
    """DEBUG turns the HTTPS settings' defaults off: its findings named variables that were
    not set, whose removal changed nothing; the fix names what turned each off."""
    _, output = doctor(storage_dir, "--no-network", **env)

    line = next(line for line in output.splitlines() if f" {code}:" in line)
    assert f" Fix: {fix}" in line
    named = {"SESSION_COOKIE_SECURE", "CSRF_COOKIE_SECURE", "SECURE_HSTS_SECONDS"} - set(env)
    assert not [name for name in named if name in line], line  # no variable that was not set


@pytest.mark.parametrize(
    ("env", "code", "fix"),
    [
        (
            {"ALLOWED_HOSTS": "https://chat.example.com"},
            "allowed-hosts-url",
            "add chat.example.com to ALLOWED_HOSTS, a host's name alone: not "
            "'https://chat.example.com'.",
        ),
        (
            {
                "SECURE_PROXY_SSL_HEADER": "0",
                "ROJO_PROXY_COUNT": "0",
                "CSRF_TRUSTED_ORIGINS": "chat.example.com",
            },
            "csrf-origin",
            "add https://chat.example.com to CSRF_TRUSTED_ORIGINS, with its scheme.",
        ),
    ],
    ids=["allowed-hosts-a-url", "csrf-origin-without-scheme"],
)
def test_a_url_where_a_host_goes_or_a_host_where_an_origin_goes_is_named(
    storage_dir, env, code, fix
):
    """The fix said to add what the operator saw already there, written the wrong way."""
    _, output = doctor(storage_dir, "--no-network", **env)

    line = next(line for line in output.splitlines() if f" {code}:" in line)
    assert line.endswith(fix), line


def test_storage_that_takes_no_files_is_found(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")

    status, output = doctor(blocker / "storage", "--no-network")

    assert (status, codes(output)) == (2, {"storage"})


def test_a_database_without_the_migrations_is_found(storage_dir, tmp_path):
    empty = tmp_path / "empty.sqlite3"
    sqlite3.connect(empty).close()

    status, output = doctor(storage_dir, "--no-network", DATABASE_URL=f"sqlite:///{empty}")

    assert (status, codes(output)) == (2, {"database-migrations"})


def test_a_database_that_does_not_answer_is_found(storage_dir):
    url = f"postgres://postgres@127.0.0.1:{closed_port()}/rojo"

    status, output = doctor(storage_dir, "--no-network", DATABASE_URL=url)

    assert status == 2
    assert "database" in codes(output)


def test_a_redis_that_does_not_answer_is_found(storage_dir):
    status, output = doctor(
        storage_dir, "--no-network", REDIS_URL=f"redis://127.0.0.1:{closed_port()}/0"
    )

    assert status == 2
    assert "redis" in codes(output)
    assert "Connection refused (ConnectionError)" in output  # why, not only the kind


def doctor_on(storage_dir: Path, url: str) -> subprocess.CompletedProcess:
    full = {**os.environ, "DJANGO_SETTINGS_MODULE": "roject.settings", **SOUND}
    full.update(DATABASE_URL=url, ROJO_STORAGE_DIR=str(storage_dir))
    return subprocess.run(
        [sys.executable, "manage.py", "doctor", "--no-network", "--url", URL],
        cwd=django_settings.BASE_DIR, env=full, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_a_refused_database_is_found_with_why_and_without_the_pools_log_or_password(
    storage_dir,
):
    """The pool's error said only that it got no connection in 2 s, after its log's
    "error connecting in 'pool-1'" lines; the finding now says why, once."""
    done = doctor_on(storage_dir, f"postgres://rojo:s3cret-pw@127.0.0.1:{closed_port()}/rojo")

    assert done.returncode == 2
    assert "database" in codes(done.stdout)
    assert "Connection refused (OperationalError)" in done.stdout
    assert "error connecting in" not in done.stderr
    assert "Traceback" not in done.stderr
    assert "s3cret-pw" not in done.stdout + done.stderr


@pytest.mark.skipif(not database_url().startswith("postgres"), reason="the suite's PostgreSQL")
def test_a_database_that_does_not_exist_is_found_by_its_name(storage_dir):
    base = database_url().rsplit("/", 1)[0]

    done = doctor_on(storage_dir, f"{base}/rojo_no_such_database")

    assert done.returncode == 2
    assert 'database "rojo_no_such_database" does not exist' in done.stdout
    assert "error connecting in" not in done.stderr


def test_a_rojo_whose_key_variable_is_missing_or_refused_is_found(storage_dir):
    make_rojo("http://127.0.0.1:9/v1", slug="unset", api_key="", api_key_env="ROJO_KEY_UNSET")
    legacy = make_rojo("http://127.0.0.1:9/v1", slug="legacy", api_key="")
    Rojo.objects.filter(pk=legacy.pk).update(api_key_env="DATABASE_URL")  # saved before the rule

    status, output = doctor(storage_dir, "--no-network")

    assert (status, codes(output)) == (2, {"rojo-key-missing", "rojo-key-rule"})
    assert "'unset'" in output and "'legacy'" in output
    assert "WARNING rojo-key-missing" in output  # a local server takes requests without one
    assert database_url() not in output  # the variable's name, never its value


def test_an_unreachable_provider_and_oidc_provider_are_found(storage_dir):
    port = closed_port()
    make_rojo(f"http://127.0.0.1:{port}/v1", slug="far")

    status, output = doctor(
        storage_dir,
        ROJO_OIDC_ISSUER=f"http://127.0.0.1:{port}/o",
        ROJO_OIDC_CLIENT_ID="rojo",
        ROJO_OIDC_CLIENT_SECRET="s",
    )

    assert status == 2
    assert codes(output) == {"provider-unreachable", "oidc"}
    assert "Fix: check the base URL of the rojo 'Test rojo' in the admin, and" in output
    assert "sk-test-secret-key-123" not in output


@pytest.mark.skipif(
    not os.environ.get("REDIS_URL", "").startswith("redis://"), reason="needs REDIS_URL"
)
def test_processes_that_see_different_storages_are_found(tmp_path):
    from redis import Redis

    url = os.environ["REDIS_URL"]
    Redis.from_url(url).delete("rojo:doctor:storage-marker")
    first, second = tmp_path / "one", tmp_path / "two"
    first.mkdir()
    second.mkdir()
    try:
        assert "storage-not-shared" not in codes(doctor(first, "--no-network", REDIS_URL=url)[1])
        assert "storage-not-shared" not in codes(doctor(first, "--no-network", REDIS_URL=url)[1])
        status, output = doctor(second, "--no-network", REDIS_URL=url)
    finally:
        Redis.from_url(url).delete("rojo:doctor:storage-marker")

    assert status == 1
    assert "storage-not-shared" in codes(output)


@pytest.mark.skipif(
    not django_settings.DATABASES["default"]["ENGINE"].endswith("postgresql"),
    reason="PostgreSQL's max_connections",
)
def test_more_pooled_connections_than_postgresql_allows_are_found(storage_dir):
    status, output = doctor(storage_dir, "--no-network", "--processes", "40")

    assert status == 2
    assert "database-connections" in codes(output)
