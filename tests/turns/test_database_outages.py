"""A running turn through a PostgreSQL outage: a PostgreSQL of the test's own (never the
shared one) stopped mid-reply, with a server process on it. The turn retries its writes for
ROJO_DB_RETRY_SECONDS; when the outage is shorter it finishes whole, when longer it ends
saying the database could not be reached and stores the text it showed once it is back.
"""

import contextlib
import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator

import psycopg
import pytest
from django.conf import settings

from tests.support.fake_provider import Gate, stream, text_chunks
from tests.support.live_server import ApiClient, parse_sse, read_until, wait_until

pytestmark = pytest.mark.django_db(transaction=True)

SETUP = """
import json
from django.contrib.auth import get_user_model
from django.contrib.sessions.backends.db import SessionStore
from roject.members.projects import project_create
from tests.support.helpers import make_rojo

user = get_user_model().objects.create_user("dana", password="not-used-here")
project = project_create(name="Outage", owner=user)
rojo = make_rojo({base_url!r})
session = SessionStore()
session.update({{
    "_auth_user_id": str(user.pk),
    "_auth_user_backend": "django.contrib.auth.backends.ModelBackend",
    "_auth_user_hash": user.get_session_auth_hash(),
}})
session.create()
print(json.dumps({{"project": project.pk, "rojo": rojo.slug, "session": session.session_key}}))
"""


def manage(database_url: str, *args: str) -> str:
    env = {"DJANGO_SETTINGS_MODULE": "roject.settings", "DATABASE_URL": database_url}
    env |= {"SECRET_KEY": settings.SECRET_KEY, "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=settings.BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return done.stdout


def last_json(output: str):
    """The JSON a shell snippet printed last (the shell prints what it imported first)."""
    return json.loads(output.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def outage_db(own_postgres):
    manage(own_postgres.url, "migrate", "--no-input")
    return own_postgres


@pytest.fixture
def on_outage_db(outage_db, server_process, fake_provider):
    """on_outage_db(**settings): a server process on the test's own PostgreSQL with these
    settings added, and a user logged in there (one process a test: each start costs
    seconds of CPU)."""
    made = last_json(
        manage(outage_db.url, "shell", "-c", SETUP.format(base_url=fake_provider.base_url))
    )
    clients = []

    def connect(**env: str) -> tuple[ApiClient, dict]:
        env = {"ROJO_PROVIDER_RETRIES": "0", **env}
        server = server_process(DATABASE_URL=outage_db.url, **env)
        client = ApiClient(server.base_url)
        client.http.cookies.set(settings.SESSION_COOKIE_NAME, made["session"])
        clients.append(client)
        return client, made

    yield connect
    for client in clients:
        client.close()
    if not outage_db.running():  # a test that failed mid-outage
        outage_db.start()
    manage(outage_db.url, "flush", "--no-input")


def _rows(outage_db, sql: str, *params) -> list[tuple]:
    """Rows read straight from the test's PostgreSQL (no Django process started for it)."""
    with psycopg.connect(outage_db.url.replace("postgres://", "postgresql://")) as connection:
        return connection.execute(sql, params).fetchall()


def stored(outage_db, conversation: int) -> dict:
    """The last turn's status and error code, the conversation's messages, and the roles of
    those search finds: the rows whose stored tsvector is set (drafts have none)."""
    status, code = _rows(
        outage_db, "SELECT status, error_code FROM rojos_turnrecord ORDER BY id DESC LIMIT 1"
    )[0]
    messages = _rows(
        outage_db,
        "SELECT role, content, search_vector IS NOT NULL FROM rojos_message "
        "WHERE conversation_id = %s ORDER BY position",
        conversation,
    )
    return {
        "status": status,
        "code": code,
        "messages": [[role, content] for role, content, _ in messages],
        "indexed": [role for role, _, indexed in messages if indexed],
    }


REPLY = "w " * 60
LONG_REPLY = "w " * 100  # 5 s of text


def held_reply(text: str, pieces: int, stopped: threading.Event):
    """`text` in paced pieces whose second half waits until the database is stopped, so that
    the outage begins while the reply runs however long stopping PostgreSQL takes."""
    chunks = text_chunks(text, pieces=pieces)
    chunks.insert(pieces // 2, Gate(stopped))
    return stream(*chunks, delay=0.05)


def test_a_turn_through_a_25_second_outage_finishes_whole(on_outage_db, outage_db, fake_provider):
    """PostgreSQL stopped for 25 s mid-reply (ROJO_DB_RETRY_SECONDS is 30): the reply ends with
    DONE and no ERROR, and is stored whole."""
    client, made = on_outage_db(ROJO_DRAFT_SECONDS="0.5")
    fake_provider.add(held_reply(REPLY, 60, stopped := threading.Event()))
    with client.chat_stream(made["project"], rojo=made["rojo"], message="Talk") as response:
        assert response.status_code == 200
        events = parse_sse(response.iter_lines())
        seen = read_until(events, "CHAT", count=2)
        outage_db.stop()
        stopped.set()
        time.sleep(25)
        outage_db.start()
        seen += list(events)

    assert [e.type for e in seen if e.type != "CHAT"] == ["START", "DONE"]
    assert "".join(e.data["text"] for e in seen if e.type == "CHAT") == REPLY
    after = stored(outage_db, seen[0].data["conversation"])
    assert after["status"] == "done"
    assert after["messages"] == [["user", "Talk"], ["assistant", REPLY]]
    assert after["indexed"] == ["user", "assistant"]  # drafts during the outage, then whole


def test_a_turn_past_the_retry_time_says_so_and_its_text_is_stored_once_the_database_is_back(
    on_outage_db, outage_db, fake_provider
):
    """An outage longer than ROJO_DB_RETRY_SECONDS (3 s here): the turn ends with ERROR code
    `database` saying the database could not be reached, then DONE; once PostgreSQL is back,
    the text shown is stored and the turn recorded, with the conversation free again."""
    client, made = on_outage_db(ROJO_DB_RETRY_SECONDS="3", ROJO_DB_POOL_TIMEOUT="2")
    fake_provider.add(held_reply(REPLY, 60, stopped := threading.Event()))
    with client.chat_stream(made["project"], rojo=made["rojo"], message="Talk") as response:
        events = parse_sse(response.iter_lines())
        seen = read_until(events, "CHAT", count=2)
        outage_db.stop()
        stopped.set()
        seen += list(events)
    outage_db.start()

    assert [e.type for e in seen][-2:] == ["ERROR", "DONE"]
    assert seen[-2].data["code"] == "database"
    assert "database could not be reached" in seen[-2].data["message"]
    shown = "".join(e.data["text"] for e in seen if e.type == "CHAT")
    deadline = time.monotonic() + 15
    while (after := stored(outage_db, seen[0].data["conversation"]))["status"] == "running":
        assert time.monotonic() < deadline, "the turn's end was never stored"
        time.sleep(1)
    assert (after["status"], after["code"]) == ("error", "database")
    assert after["messages"] == [["user", "Talk"], ["assistant", shown]]


def test_a_draft_stored_before_an_outage_past_the_retry_time_is_finished_once_it_is_back(
    on_outage_db, outage_db, fake_provider
):
    """A reply whose draft was stored, then PostgreSQL stopped past ROJO_DB_RETRY_SECONDS:
    the text shown is written over the draft once the database is back, and is no longer a
    draft, so search finds it."""
    client, made = on_outage_db(
        ROJO_DB_RETRY_SECONDS="3", ROJO_DB_POOL_TIMEOUT="2", ROJO_DRAFT_SECONDS="0.2"
    )
    fake_provider.add(held_reply(LONG_REPLY, 100, stopped := threading.Event()))
    with client.chat_stream(made["project"], rojo=made["rojo"], message="Talk") as response:
        events = parse_sse(response.iter_lines())
        seen = read_until(events, "CHAT", count=2)
        conversation = seen[0].data["conversation"]
        wait_until(lambda: len(stored(outage_db, conversation)["messages"]) == 2, timeout=60)
        outage_db.stop()  # once a draft of the reply is stored
        stopped.set()
        seen += list(events)
    outage_db.start()

    assert [e.type for e in seen][-2:] == ["ERROR", "DONE"]
    assert seen[-2].data["code"] == "database"
    deadline = time.monotonic() + 15
    while (after := stored(outage_db, seen[0].data["conversation"]))["status"] == "running":
        assert time.monotonic() < deadline, "the turn's end was never stored"
        time.sleep(1)
    assert after["messages"] == [["user", "Talk"], ["assistant", LONG_REPLY]]
    assert after["indexed"] == ["user", "assistant"]


WAITING_INSERT = """
SELECT count(*) FROM pg_stat_activity
WHERE wait_event_type = 'Lock' AND query LIKE 'INSERT INTO "rojos_usagerecord"%%'
"""


def stored_usage(outage_db, conversation: int) -> list:
    rows = _rows(
        outage_db,
        "SELECT m.role, u.reported FROM rojos_usagerecord u "
        "JOIN rojos_message m ON m.id = u.message_id WHERE u.conversation_id = %s ORDER BY u.id",
        conversation,
    )
    return [[role, reported] for role, reported in rows]


@contextlib.contextmanager
def usage_inserts_held(outage_db) -> Iterator[Callable[[], None]]:
    """The usage table locked against inserts (reads go on) by a transaction of the test's
    own, which PostgreSQL's stop ends; yields a wait for a turn's insert to wait on it: the
    moment after a reply was stored, as its usage is written, held without a hook in the
    app."""
    url = outage_db.url.replace("postgres://", "postgresql://")
    holder, watcher = psycopg.connect(url), psycopg.connect(url, autocommit=True)
    try:
        holder.execute("LOCK TABLE rojos_usagerecord IN SHARE MODE")  # its transaction's
        yield lambda: wait_until(
            lambda: watcher.execute(WAITING_INSERT).fetchone()[0] == 1, timeout=60
        )
    finally:
        holder.close()  # their server was stopped under them: nothing to commit
        watcher.close()


def test_an_outage_between_the_stored_reply_and_its_usage_is_waited_out(
    on_outage_db, outage_db, fake_provider
):
    """PostgreSQL stopped for 3 s just after the reply was stored, as its usage is written:
    the usage write is retried like the reply's, so the reply ends with DONE and no ERROR,
    counted once, and the conversation is free. Before, that write alone was not retried:
    the turn ended with ERROR `database` and the usage was never recorded."""
    client, made = on_outage_db(ROJO_DRAFT_SECONDS="0.5")
    fake_provider.add(stream(*text_chunks("All done.")))
    with (
        usage_inserts_held(outage_db) as waiting,
        client.chat_stream(made["project"], rojo=made["rojo"], message="Talk") as response,
    ):
        events = parse_sse(response.iter_lines())
        seen = read_until(events, "CHAT")
        waiting()
        outage_db.stop()
        time.sleep(3)
        outage_db.start()
        seen += list(events)

    assert [e.type for e in seen if e.type != "CHAT"] == ["START", "DONE"]
    conversation = seen[0].data["conversation"]
    after = stored(outage_db, conversation)
    assert after["status"] == "done"
    assert after["messages"] == [["user", "Talk"], ["assistant", "All done."]]
    assert stored_usage(outage_db, conversation) == [["assistant", True]]


def test_a_usage_write_past_the_retry_time_is_stored_with_the_turns_end_once_it_is_back(
    on_outage_db, outage_db, fake_provider
):
    """The same outage, longer than ROJO_DB_RETRY_SECONDS (3 s here): the turn ends with
    ERROR `database`, and once PostgreSQL is back the usage is recorded with the turn's end,
    as the text an outage kept from being stored is. Before, it was lost: the budgets never
    counted that reply."""
    client, made = on_outage_db(ROJO_DB_RETRY_SECONDS="3", ROJO_DB_POOL_TIMEOUT="2")
    fake_provider.add(stream(*text_chunks("All done.")))
    with (
        usage_inserts_held(outage_db) as waiting,
        client.chat_stream(made["project"], rojo=made["rojo"], message="Talk") as response,
    ):
        events = parse_sse(response.iter_lines())
        seen = read_until(events, "CHAT")
        waiting()
        outage_db.stop()
        seen += list(events)
    outage_db.start()

    assert [e.type for e in seen][-2:] == ["ERROR", "DONE"]
    assert seen[-2].data["code"] == "database"
    conversation = seen[0].data["conversation"]
    deadline = time.monotonic() + 30
    while (after := stored(outage_db, conversation))["status"] == "running":
        assert time.monotonic() < deadline, "the turn's end was never stored"
        time.sleep(1)
    assert (after["status"], after["code"]) == ("error", "database")
    assert after["messages"] == [["user", "Talk"], ["assistant", "All done."]]
    assert stored_usage(outage_db, conversation) == [["assistant", True]]
