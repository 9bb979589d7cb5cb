"""On SQLite, the writers of one process take turns instead of racing for the file lock."""

import threading
import time

import pytest
from django.contrib.auth.models import User
from django.db import OperationalError, connection, connections, transaction

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's writer lock"),
]

THREADS = 40
WRITES = 10


@pytest.fixture
def short_busy_timeout():
    """A busy timeout that SQLite's polling misses under contention (1 s)."""
    options = connections.settings["default"]["OPTIONS"]
    before = options.get("timeout")
    options["timeout"] = 1.0
    yield
    options["timeout"] = before


@pytest.fixture
def no_race_allowed(monkeypatch):
    """SQLite's busy timeout 0: a writer that raced another for the file lock fails at once
    ("database is locked"); the process's writer lock waits as long as a loaded machine needs
    (it waits SQLite's busy timeout otherwise)."""
    from roject.server.sqlite_backend.base import DatabaseWrapper

    options = connections.settings["default"]["OPTIONS"]
    before = options.get("timeout")
    options["timeout"] = 0
    monkeypatch.setattr(DatabaseWrapper, "_timeout", property(lambda self: 60.0))
    yield
    options["timeout"] = before


def _writer(index: int, failures: list[str]) -> None:
    try:
        for n in range(WRITES):
            with transaction.atomic():
                User.objects.create(username=f"w{index}-{n}")
                time.sleep(0.002)  # the transaction holds the lock a while, as under load
            User.objects.filter(username=f"w{index}-{n}").update(first_name="x")  # autocommit
    except OperationalError as exc:
        failures.append(str(exc))
    finally:
        connections.close_all()


def test_many_writing_threads_all_get_their_turn(no_race_allowed):
    failures: list[str] = []
    threads = [threading.Thread(target=_writer, args=(i, failures)) for i in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert failures == []
    assert User.objects.filter(first_name="x").count() == THREADS * WRITES


def test_a_failed_transaction_lets_the_next_writer_in():
    with pytest.raises(RuntimeError), transaction.atomic():
        User.objects.create(username="first")
        raise RuntimeError("rolled back")
    done = threading.Event()

    def write() -> None:
        try:
            User.objects.create(username="second")
            done.set()
        finally:
            connections.close_all()

    thread = threading.Thread(target=write)
    thread.start()
    thread.join(10)
    assert done.is_set()
    assert list(User.objects.values_list("username", flat=True)) == ["second"]


def test_a_database_locked_past_its_timeout_answers_503_and_stores_nothing(
    client_for, users, project, fake_provider, short_busy_timeout
):
    from roject.server.sqlite_backend.base import _writer_lock
    from rojos.models import Conversation, Message
    from tests.support.helpers import make_rojo

    rojo = make_rojo(fake_provider.base_url)
    client = client_for(users["editor"])
    lock = _writer_lock(str(connections.settings["default"]["NAME"]))
    with lock:  # another writer holds the database for longer than the timeout
        response = client.post(
            f"/api/projects/{project.pk}/chat", json={"rojo": rojo.pk, "message": "Hi"}
        )
    assert response.status_code == 503
    assert response.headers["retry-after"] == "5"
    assert response.json() == {
        "detail": "The database is busy or unreachable; try again in a moment."
    }
    assert not Conversation.objects.exists() and not Message.objects.exists()
    assert client.get("/api/projects").status_code == 200


def test_each_connection_keeps_a_small_page_cache():
    """Each database thread keeps its connection for the life of the process, and SQLite's
    default page cache (2 MiB each) fills with every long reply written: bounded to 512 KiB."""
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA cache_size")
        assert cursor.fetchone() == (-512,)
