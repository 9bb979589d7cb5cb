"""The production settings refuse to start without a secret key and pass Django's deploy checks."""

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]

# Variables the settings read; removed so the parent's environment cannot leak in.
SETTINGS_VARIABLES = (
    "DJANGO_SETTINGS_MODULE",
    "SECRET_KEY",
    "SECRET_KEY_FILE",
    "DEBUG",
    "ALLOWED_HOSTS",
    "CSRF_TRUSTED_ORIGINS",
    "DATABASE_URL",
    "REDIS_URL",
    "SECURE_SSL_REDIRECT",
    "SESSION_COOKIE_SECURE",
    "CSRF_COOKIE_SECURE",
    "SECURE_HSTS_SECONDS",
    "SECURE_HSTS_INCLUDE_SUBDOMAINS",
    "SECURE_HSTS_PRELOAD",
    "SECURE_PROXY_SSL_HEADER",
)


def manage(*args: str, tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    """Run manage.py with roject.settings and only the given settings variables."""
    clean = {k: v for k, v in os.environ.items() if k not in SETTINGS_VARIABLES}
    clean["ROJO_STORAGE_DIR"] = str(tmp_path / "storage")
    clean.update(env)
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=REPO_ROOT,
        env=clean,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("debug", [None, "0", "", "false"])
def test_refuses_to_start_without_secret_key_when_not_debugging(tmp_path, debug):
    """With DEBUG off and no SECRET_KEY, startup fails with a message, not a traceback."""
    env = {} if debug is None else {"DEBUG": debug}
    result = manage("check", tmp_path=tmp_path, **env)
    assert result.returncode != 0
    assert "SECRET_KEY is not set" in result.stderr
    assert "Traceback" not in result.stderr


def test_empty_secret_key_counts_as_unset(tmp_path):
    """An empty SECRET_KEY is no key at all."""
    result = manage("check", tmp_path=tmp_path, DEBUG="0", SECRET_KEY="")
    assert result.returncode != 0
    assert "SECRET_KEY is not set" in result.stderr


@pytest.mark.parametrize("where", ["missing", "a directory"])
def test_an_unreadable_secret_key_file_stops_the_start_with_a_message(tmp_path, where):
    """SECRET_KEY_FILE naming no readable file is an operator's mistake: named, no traceback."""
    path = tmp_path / "no-such-key" if where == "missing" else tmp_path
    result = manage("check", tmp_path=tmp_path, DEBUG="0", SECRET_KEY_FILE=str(path))
    assert result.returncode == 2
    assert f"SECRET_KEY_FILE: cannot read {str(path)!r}" in result.stderr
    assert "Traceback" not in result.stderr


def test_the_secret_key_is_read_from_its_file(tmp_path):
    """With no SECRET_KEY, the key comes from SECRET_KEY_FILE (the image's own)."""
    key = tmp_path / "secret_key"
    key.write_text(secrets.token_urlsafe(64) + "\n")
    result = manage(
        "check", "--deploy", "--fail-level", "WARNING", tmp_path=tmp_path, DEBUG="0",
        SECRET_KEY_FILE=str(key), ALLOWED_HOSTS="example.com",
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr


def test_starts_with_debug_and_no_secret_key(tmp_path):
    """DEBUG=1 runs a local server with a throw-away key."""
    result = manage("check", tmp_path=tmp_path, DEBUG="1")
    assert result.returncode == 0, result.stderr
    assert "System check identified no issues" in result.stdout


def test_production_settings_pass_deploy_checks(tmp_path):
    """DEBUG off with a real key and host gives no deploy warning at all."""
    result = manage(
        "check",
        "--deploy",
        "--fail-level",
        "WARNING",
        tmp_path=tmp_path,
        DEBUG="0",
        SECRET_KEY=secrets.token_urlsafe(64),
        ALLOWED_HOSTS="example.com",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout


def test_deploy_checks_catch_a_weak_secret_key(tmp_path):
    """The deploy check is live: a short key makes it fail, so the passing case means something."""
    result = manage(
        "check",
        "--deploy",
        "--fail-level",
        "WARNING",
        tmp_path=tmp_path,
        DEBUG="0",
        SECRET_KEY="short",
        ALLOWED_HOSTS="example.com",
    )
    assert result.returncode != 0
    assert "security.W009" in result.stdout + result.stderr


def test_a_malformed_group_role_mapping_stops_the_start_with_a_message(tmp_path):
    """ROJO_OIDC_GROUP_ROLES is group:project-slug:role; a typo is caught at start."""
    result = manage("check", tmp_path=tmp_path, DEBUG="1", ROJO_OIDC_GROUP_ROLES="eds:docs:edtor")
    assert result.returncode == 2
    assert "ROJO_OIDC_GROUP_ROLES: 'eds:docs:edtor' is not group:project-slug:role" in result.stderr


def test_group_role_mappings_parse_with_colons_in_group_names():
    from roject.settings import oidc_group_roles

    assert oidc_group_roles(" /team:docs:docs:owner , docs-editors:docs:editor,") == [
        ("/team:docs", "docs", "owner"),
        ("docs-editors", "docs", "editor"),
    ]


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("localhost/rojo", "Scheme '://' is unknown"),
        ("postgress://rojo:s3cret@db/rojo", "Scheme 'postgress://' is unknown"),
        ("postgres://rojo:s3cr[et@db/rojo", "not a valid url"),
    ],
)
def test_a_malformed_database_url_stops_the_start_with_a_message(tmp_path, url, reason):
    """DATABASE_URL that is no database URL is named with why, without its password."""
    result = manage("check", tmp_path=tmp_path, DEBUG="1", DATABASE_URL=url)
    assert result.returncode == 2
    assert "DATABASE_URL is not a database URL" in result.stderr
    assert reason in result.stderr
    assert "s3cr" not in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("scheme", ["mysql", "oracle", "postgis"])
def test_a_database_rojo_does_not_run_on_stops_the_start_with_a_message(tmp_path, scheme):
    """mysql:// got Django's "Did you install mysqlclient?", which would not have helped."""
    url = f"{scheme}://rojo:s3cret@db.example.com/rojo"
    result = manage("doctor", tmp_path=tmp_path, DEBUG="1", DATABASE_URL=url)
    assert result.returncode == 2
    assert f"DATABASE_URL: Rojo runs on PostgreSQL or SQLite, not {scheme}://." in result.stderr
    assert "s3cret" not in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("command", ["check", "doctor"])
@pytest.mark.parametrize(
    "url", ["localhost:6379", "127.0.0.1:6379/0", "http://:s3cret@127.0.0.1:6379/0"]
)
def test_a_redis_url_without_a_redis_scheme_stops_the_start_with_a_message(tmp_path, command, url):
    """REDIS_URL missing its redis:// (the doctor answered redis-py's ValueError with a
    traceback) is named with what to write, without its password."""
    result = manage(command, tmp_path=tmp_path, DEBUG="1", REDIS_URL=url)
    assert result.returncode == 2
    assert "REDIS_URL is not a Redis URL: it must start with redis://" in result.stderr
    assert "s3cret" not in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("variable", "value", "what"),
    [
        ("ROJO_TURN_MAX_SECONDS", "30m", "a number"),
        ("ROJO_MAX_READ_BYTES", "1MiB", "a whole number"),
        ("ROJO_DB_THREADS", "eight", "a whole number"),
        ("SECURE_HSTS_SECONDS", "1 year", "a whole number"),
    ],
)
def test_a_setting_that_is_not_a_number_stops_the_start_with_its_name(
    tmp_path, variable, value, what
):
    """A number setting given something else is named with its value, not a ValueError."""
    result = manage("check", tmp_path=tmp_path, DEBUG="1", **{variable: value})
    assert result.returncode == 2
    assert f"{variable}: {value!r} is not {what}." in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("variable", "value", "bound"),
    [
        ("ROJO_LIVE_CHECK_SECONDS", "0", "more than 0"),
        ("ROJO_LIVE_CHECK_SECONDS", "-1", "more than 0"),
        ("ROJO_TURN_HEARTBEAT_SECONDS", "0", "more than 0"),
        ("ROJO_MCP_CALL_MAX_SECONDS", "0", "more than 0"),
        ("ROJO_ELICITATION_SECONDS", "-300", "more than 0"),
        ("ROJO_START_CONCURRENCY", "0", "more than 0"),
        ("ROJO_MAX_PDF_BYTES", "-1", "0 or more"),
        ("ROJO_PROXY_COUNT", "-1", "0 or more"),
    ],
)
@pytest.mark.parametrize("command", ["check", "doctor"])
def test_a_setting_out_of_its_range_stops_the_start_with_its_name(
    tmp_path, command, variable, value, bound
):
    """A live stream checked every 0 s spun a core and queried the database without pause, a
    heartbeat of 0 s wrote its claim as fast as the database took it: a number no setting
    means is named with its range at start, by the doctor too, as a word that is no number is."""
    result = manage(command, tmp_path=tmp_path, DEBUG="1", **{variable: value})
    assert result.returncode == 2
    assert f"{variable}: {value!r} must be {bound}." in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_a_number_setting_that_is_not_finite_stops_the_start(tmp_path, value):
    """float() reads nan and inf: a timeout of nan never fires, and is no number a person means."""
    result = manage("check", tmp_path=tmp_path, DEBUG="1", ROJO_MCP_CALL_TIMEOUT=value)
    assert result.returncode == 2
    assert f"ROJO_MCP_CALL_TIMEOUT: {value!r} is not a number." in result.stderr


def test_the_settings_whose_0_means_off_still_take_0(tmp_path):
    """0 turns these off (docs/operations.md): the range check leaves them be."""
    zeros = (
        "ROJO_END_YIELD_SECONDS",
        "ROJO_MALLOC_TRIM_SECONDS",
        "ROJO_PROXY_COUNT",
        "ROJO_UPLOAD_STALL_SECONDS",
        "ROJO_CLIENT_WRITE_TIMEOUT",
        "ROJO_TURN_READ_BYTES",
        "ROJO_USER_MESSAGES_PER_MINUTE",
        "ROJO_KEPT_RESULT_DAYS",
        "ROJO_DRAFT_SECONDS",
    )
    result = manage("check", tmp_path=tmp_path, DEBUG="1", **dict.fromkeys(zeros, "0"))
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("command", [["migrate"], ["serve", "--no-server"], ["backup", "b.tar"]])
def test_a_database_that_cannot_be_opened_stops_a_command_with_a_message(tmp_path, command):
    """DATABASE_URL naming a database out of reach: the command says so, not a traceback."""
    url = f"sqlite:///{tmp_path}/no-such-directory/db.sqlite3"
    result = manage(*command, tmp_path=tmp_path, DEBUG="1", DATABASE_URL=url)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert "unable to open database file" in result.stderr or "No such file" in result.stderr
    assert "DATABASE_URL" in result.stderr


def test_a_relative_sqlite_path_is_named_where_it_leads_with_the_four_slashes(tmp_path):
    """sqlite:///tmp/x/db.sqlite3 is relative to the working directory: the command named the
    database server to check; it names the file it looked for and how to write an absolute one."""
    result = manage("create_project", "--name", "X", "--owner", "demo", tmp_path=tmp_path,
                    DEBUG="1", DATABASE_URL="sqlite:///no-such-directory/db.sqlite3")  # fmt: skip

    assert result.returncode == 1
    assert f"'{REPO_ROOT / 'no-such-directory' / 'db.sqlite3'}', whose directory" in result.stderr
    assert "takes four slashes (sqlite:////data/rojo.sqlite3)" in result.stderr
    assert "database server" not in result.stderr and "Traceback" not in result.stderr


def test_a_command_on_a_database_without_migrations_says_to_migrate(tmp_path):
    """A new database file, never migrated: 'no such table', then the fix, not a server to
    reach."""
    url = f"sqlite:///{tmp_path}/new.sqlite3"

    result = manage("demo", tmp_path=tmp_path, DEBUG="1", DATABASE_URL=url)

    assert result.returncode == 1
    assert "no such table" in result.stderr
    assert f"(the SQLite file '{tmp_path}/new.sqlite3') lacks " in result.stderr
    assert "migrations: run manage.py migrate." in result.stderr
    assert "database server" not in result.stderr and "Traceback" not in result.stderr


def test_the_traceback_option_still_shows_where_a_database_error_came_from(tmp_path):
    """--traceback is Django's way to see the stack; a database error keeps it."""
    url = f"sqlite:///{tmp_path}/no-such-directory/db.sqlite3"
    result = manage("migrate", "--traceback", tmp_path=tmp_path, DEBUG="1", DATABASE_URL=url)
    assert result.returncode == 1
    assert "Traceback" in result.stderr


def test_the_log_level_is_read_in_any_case_and_a_wrong_one_is_named(tmp_path):
    """ROJO_LOG_LEVEL=info is INFO; a level logging does not know stops the start, named."""
    assert manage("check", tmp_path=tmp_path, DEBUG="1", ROJO_LOG_LEVEL="info").returncode == 0
    result = manage("check", tmp_path=tmp_path, DEBUG="1", ROJO_LOG_LEVEL="verbose")
    assert result.returncode == 2
    assert "ROJO_LOG_LEVEL: 'VERBOSE' is not a level" in result.stderr
    assert "ERROR, CRITICAL." in result.stderr  # every level it takes is named
    assert "Traceback" not in result.stderr
    assert manage("check", tmp_path=tmp_path, DEBUG="1", ROJO_LOG_LEVEL="critical").returncode == 0
