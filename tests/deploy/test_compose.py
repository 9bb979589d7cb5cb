"""deploy/compose.yaml, read by a real compose implementation (podman-compose's `config`): the
stack a team starts, with its settings from one env file and no secret left to a default."""

import shutil
import subprocess

import dj_database_url
import pytest
import yaml
from dotenv import dotenv_values

from roject.server.graceful import CONNECTIONS_SECONDS
from rojos.turns.shutdown import END_SECONDS
from tests.support.image_build import DEPLOY, compose_config, env_file


@pytest.fixture
def stack(tmp_path) -> dict:
    filled = env_file(tmp_path, SECRET_KEY="k" * 50, POSTGRES_PASSWORD="pg-secret")
    done = compose_config(filled)
    assert done.returncode == 0, done.stderr
    return yaml.safe_load(done.stdout)


def test_the_stack_is_two_app_containers_behind_a_proxy_with_postgres_and_redis(stack):
    services = stack["services"]

    assert sorted(services) == ["app1", "app2", "postgres", "proxy", "redis"]
    for name in ("app1", "app2"):
        app = services[name]
        assert app["environment"]["DATABASE_URL"] == "postgres://rojo@postgres:5432/rojo"
        assert app["environment"]["PGPASSWORD"] == "pg-secret"
        assert app["environment"]["REDIS_URL"] == "redis://redis:6379/0"
        assert "storage:/data" in app["volumes"]  # one storage for every process
        assert app["build"]["dockerfile"] == "Containerfile"
    assert services["proxy"]["environment"]["ROJO_DOMAIN"] == "chat.example.com"
    for name in ("proxy", "postgres", "redis"):
        assert services[name]["image"].startswith("docker.io/library/")  # the official ones,
        assert "@sha256:" in services[name]["image"]  # pinned


def test_the_proxies_counted_are_caddy_unless_rojo_env_says_more(tmp_path, stack):
    """A load balancer in front of Caddy makes two proxies that append to X-Forwarded-For:
    compose.yaml's fixed "1" overrode rojo.env's ROJO_PROXY_COUNT, so every client behind the
    balancer counted as the balancer's address for the login limits and previews."""
    (tmp_path / "balanced").mkdir()
    filled = env_file(tmp_path / "balanced", SECRET_KEY="k" * 50, POSTGRES_PASSWORD="pg-secret",
                      ROJO_PROXY_COUNT="2")  # fmt: skip
    done = compose_config(filled)

    assert done.returncode == 0, done.stderr
    for name in ("app1", "app2"):
        assert stack["services"][name]["environment"]["ROJO_PROXY_COUNT"] == "1"
        app = yaml.safe_load(done.stdout)["services"][name]
        assert app["environment"]["ROJO_PROXY_COUNT"] == "2"


def test_the_third_party_images_can_come_from_a_mirror(tmp_path):
    mirror = {
        "ROJO_CADDY_IMAGE": "mirror.example.com/caddy:2.10-alpine@sha256:" + "a" * 64,
        "ROJO_POSTGRES_IMAGE": "mirror.example.com/postgres:16-bookworm@sha256:" + "b" * 64,
        "ROJO_REDIS_IMAGE": "mirror.example.com/redis:7-bookworm@sha256:" + "c" * 64,
    }
    filled = env_file(tmp_path, SECRET_KEY="k" * 50, POSTGRES_PASSWORD="pg-secret", **mirror)
    done = compose_config(filled)

    assert done.returncode == 0, done.stderr
    services = yaml.safe_load(done.stdout)["services"]
    assert services["proxy"]["image"] == mirror["ROJO_CADDY_IMAGE"]
    assert services["postgres"]["image"] == mirror["ROJO_POSTGRES_IMAGE"]
    assert services["redis"]["image"] == mirror["ROJO_REDIS_IMAGE"]


def test_a_stack_without_its_secrets_refuses_to_start(tmp_path):
    done = compose_config(env_file(tmp_path, SECRET_KEY="k" * 50))

    assert done.returncode != 0
    assert "set POSTGRES_PASSWORD in rojo.env" in done.stderr + done.stdout


@pytest.mark.skipif(not shutil.which("caddy"), reason="Debian's caddy validates the Caddyfile")
def test_the_caddyfile_is_valid(tmp_path):
    done = subprocess.run(
        ["caddy", "validate", "--adapter", "caddyfile", "--config", str(DEPLOY / "Caddyfile")],
        capture_output=True, text=True, timeout=60,
        env={"ROJO_DOMAIN": "chat.example.com", "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip

    assert done.returncode == 0, done.stderr


def container_environment(env_path, service: dict) -> dict:
    """What a container of `service` starts with: rojo.env (`env_file`), then `environment`
    over it, as compose passes them."""
    return dotenv_values(env_path) | service.get("environment", {})


@pytest.mark.parametrize("password", ["p@ss/w:rd#1%2F?x", "a@evil.example.com:5432/other"])
def test_any_postgres_password_reaches_the_app_whole(tmp_path, password):
    """The password went into DATABASE_URL as typed: `@`, `/`, `:`, `#` or `%` in it broke the
    URL, or made it name another host. The app connects to the stack's database with it."""
    filled = env_file(tmp_path, SECRET_KEY="k" * 50, POSTGRES_PASSWORD=password)
    done = compose_config(filled)

    assert done.returncode == 0, done.stderr
    services = yaml.safe_load(done.stdout)["services"]
    assert services["postgres"]["environment"]["POSTGRES_PASSWORD"] == password
    for name in ("app1", "app2"):
        environment = container_environment(filled, services[name])
        database = dj_database_url.parse(environment["DATABASE_URL"])
        assert (database["HOST"], database["PORT"]) == ("postgres", 5432)
        assert (database["USER"], database["NAME"]) == ("rojo", "rojo")
        # No password in the URL: libpq (under Django's psycopg) takes PGPASSWORD's.
        assert database["PASSWORD"] == ""
        assert environment["PGPASSWORD"] == password


def test_the_admin_password_reaches_only_the_container_that_creates_the_admin(tmp_path):
    """rojo.env went whole to every app container: the admin's password sat in each one's
    environment for its life, and PostgreSQL's beside the copy the app connects with."""
    filled = env_file(tmp_path, SECRET_KEY="k" * 50, POSTGRES_PASSWORD="pg-secret",
                      ROJO_ADMIN_PASSWORD="admin-secret")  # fmt: skip
    done = compose_config(filled)

    assert done.returncode == 0, done.stderr
    services = yaml.safe_load(done.stdout)["services"]
    first, second = (container_environment(filled, services[n]) for n in ("app1", "app2"))
    assert first["ROJO_ADMIN_PASSWORD"] == "admin-secret"
    assert "--no-admin" not in services["app1"].get("command", [])
    assert not second["ROJO_ADMIN_PASSWORD"]
    assert services["app2"]["command"] == ["--no-admin"]  # so it never makes one up instead
    for environment in (first, second):
        assert not environment["POSTGRES_PASSWORD"]
        assert environment["PGPASSWORD"] == "pg-secret"
        assert environment["SECRET_KEY"] == "k" * 50  # the rest of rojo.env still comes


def test_the_containers_stop_timeout_is_set_beside_the_replies_grace_in_rojo_env(tmp_path):
    """compose.yaml's fixed 40 s killed the containers mid-drain when rojo.env gave replies a
    longer ROJO_SHUTDOWN_GRACE_SECONDS; the stop timeout is now rojo.env's too."""
    filled = env_file(tmp_path, SECRET_KEY="k" * 50, POSTGRES_PASSWORD="pg-secret",
                      ROJO_SHUTDOWN_GRACE_SECONDS="120", ROJO_STOP_SECONDS="145")  # fmt: skip
    done = compose_config(filled)

    assert done.returncode == 0, done.stderr
    services = yaml.safe_load(done.stdout)["services"]
    for name in ("app1", "app2"):
        assert services[name]["stop_grace_period"] == "145s"
        assert container_environment(filled, services[name])["ROJO_SHUTDOWN_GRACE_SECONDS"] == (
            "120"
        )


def test_the_example_env_gives_a_stop_the_grace_and_the_interrupted_replies_end(tmp_path):
    """After the grace, replies still running get up to END_SECONDS to record their end as
    interrupted, then open connections CONNECTIONS_SECONDS: the fixed 40 s the stack gave its
    containers left 10 of those 25 beside the default 30 s grace."""
    example = dotenv_values(DEPLOY / "rojo.env.example")
    done = compose_config(env_file(tmp_path, SECRET_KEY="k" * 50, POSTGRES_PASSWORD="pg-secret"))

    assert done.returncode == 0, done.stderr
    stop = yaml.safe_load(done.stdout)["services"]["app1"]["stop_grace_period"]
    assert stop == f"{example['ROJO_STOP_SECONDS']}s"
    after_grace = END_SECONDS + CONNECTIONS_SECONDS
    assert float(example["ROJO_STOP_SECONDS"]) >= (
        float(example["ROJO_SHUTDOWN_GRACE_SECONDS"]) + after_grace
    )
