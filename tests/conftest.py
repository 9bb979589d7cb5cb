"""Shared fixtures: users with each role in one project, and a fresh storage dir per test."""

import asyncio
import concurrent.futures
import contextlib
import os

import pytest
from django.contrib.auth import get_user_model

from roject.members.projects import project_create
from roject.models import Role
from tests.support.layer_per_loop import layer_per_loop_install

layer_per_loop_install()

pytest_plugins = [
    "tests.support.fake_provider",
    "tests.support.big_results",
    "tests.support.held_write",
    "tests.support.live_server",
    "tests.support.server_process",
    "tests.support.own_services",
    "tests.support.browser",
    "tests.support.replay_story",
    "tests.support.oidc_server",
    "tests.support.oauth_mcp",
    "tests.support.image_build",
    "tests.support.other_backend",
]


# The tests whose behaviour depends on the database and channel layer, or that run more than
# one process: CI runs them again on PostgreSQL + Redis (`make test PYTEST_ARGS="-m backend"`);
# the rest are logic, run once. Marked here by what they use, beside those marked in place.
BACKEND_FIXTURES = {"server_process", "module_server", "second_server"}
BACKEND_MODULES = {
    "test_approvals",  # decisions and stops go through the control layer
    "test_owner_approvals",
    "test_follow_batches",
    "test_turn_lifecycle",  # stops, and a table lock of each database's own
    "test_budget_starts",  # row locks of the project and the user
    "test_cached_sessions",  # sessions in the cache: Redis, or the process's memory
    "test_channel_layer",
    "test_control_messages",
    "test_db_threads",
    "test_login_limits",  # counts in the cache
    "test_oidc_roles_concurrency",  # row locks
    "test_prepared_queries",  # compiled by each database's backend
    "test_project_live",
    "test_reattach_turns",
    "test_relay_continuity",
    "test_scale_out",
    "test_search",  # PostgreSQL's full-text search, SQLite's LIKE
    "test_text_stores",  # a NUL: PostgreSQL refuses it, SQLite's substr() ends at it
    "test_tool_call_deltas_scale_out",
    "test_turn_relay",
    "test_turn_start",  # claims: row locks and the channel layer
}


def pytest_collection_modifyitems(items):
    for item in items:
        module = item.module.__name__.rpartition(".")[2] if item.module else ""
        if module in BACKEND_MODULES or BACKEND_FIXTURES & set(item.fixturenames):
            item.add_marker(pytest.mark.backend)


@pytest.fixture(scope="session", autouse=True)
def redis_database_empty():
    """This worker's Redis database (tests/settings.py) starts empty: nothing a killed run
    left there (groups, cached logins) lingers into this one."""
    url = os.environ.get("REDIS_URL", "").strip()
    if url:
        import redis

        client = redis.Redis.from_url(url)
        client.flushdb()
        client.close()


@pytest.fixture(autouse=True)
def storage_dir(settings, tmp_path):
    """Every test gets its own empty ROJO_STORAGE_DIR."""
    settings.ROJO_STORAGE_DIR = tmp_path / "storage"
    settings.ROJO_STORAGE_DIR.mkdir()
    return settings.ROJO_STORAGE_DIR


def make_user(username: str):
    return get_user_model().objects.create_user(username=username, password="pw-" + username)


@pytest.fixture
def root(tmp_path):
    """An empty project root in a temporary directory."""
    root = tmp_path / "root"
    root.mkdir()
    return root


@pytest.fixture
def ctx(root):
    """An editor's tool context on `root`, every tool enabled."""
    from tests.support.helpers import context

    return context(root)


@pytest.fixture
def users(db):
    """owner, editor, viewer (members of `project`) and outsider (a member of nothing)."""
    return {name: make_user(name) for name in ("owner", "editor", "viewer", "outsider")}


@pytest.fixture
def project(users):
    return project_create(
        name="Demo Project",
        owner=users["owner"],
        members={users["editor"]: Role.EDITOR, users["viewer"]: Role.VIEWER},
    )


@pytest.fixture(autouse=True)
def empty_cache():
    """Failed logins counted in one test do not lock out the next: this run's keys go."""
    yield
    from django.core.cache import cache

    if hasattr(cache, "_cache") and hasattr(cache._cache, "get_client"):  # Redis, shared
        client = cache._cache.get_client(write=True)
        for key in client.scan_iter(match=cache.make_key("*")):
            client.delete(key)
    else:
        cache.clear()


@pytest.fixture(autouse=True)
def turns_of_the_test_ended():
    """Finished turns are kept for re-attach, and ids restart after a flush: drop them per test;
    stop the turns a test left running, and wait until they have ended."""
    from rojos.turns import registry as turn_registry

    yield
    ending = []
    for conversation_id, turn in list(turn_registry._turns.items()):
        task = turn.task
        if task is not None and not task.done():
            # A turn a test left running (the live server's turns outlive their requests)
            # would ask the session's fake provider for its next step, and take the reply
            # the next test scripted for its own turn; and its last writes, racing the
            # database's flush after the test, deadlock with it on PostgreSQL.
            with contextlib.suppress(RuntimeError):  # its loop is closed: it ran already
                loop = task.get_loop()
                if not turn.finished:
                    loop.call_soon_threadsafe(task.cancel)
                if loop.is_running():  # else nothing runs it (a test's own loop, done)
                    ending.append(asyncio.run_coroutine_threadsafe(asyncio.wait([task]), loop))
        turn_registry._turns.pop(conversation_id, None)
    for end in ending:
        with contextlib.suppress(concurrent.futures.TimeoutError):
            end.result(timeout=15)


@pytest.fixture(autouse=True)
def forget_learned_windows():
    """The fake provider keeps its URL for the session: what one test learned is not the next's."""
    from rojos.context.discovery import window_discovery_forget

    window_discovery_forget()
    yield
    window_discovery_forget()


@pytest.fixture
def crossings(monkeypatch) -> list[str]:
    """The names of the functions handed to the database threads, as they are."""
    from roject.server.db_threads import _Lane

    names: list[str] = []
    submit = _Lane.submit

    def counted(self, fn, /, *args, **kwargs):
        child = fn.args[-1] if getattr(fn, "args", None) else fn
        target = getattr(child, "func", child)
        names.append(getattr(target, "__qualname__", type(target).__qualname__))
        return submit(self, fn, *args, **kwargs)

    monkeypatch.setattr(_Lane, "submit", counted)
    return names
