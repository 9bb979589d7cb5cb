"""Per-user limits that hold under concurrency (#15): counted and claimed in the transaction
that starts the turn, so parallel messages of one user start at most the limit, in one
server process or across two. Over a limit nothing is stored and the chat answers 429."""

import threading
from collections import Counter

import pytest

from rojos.models import Conversation, Message, TurnRecord
from tests.support.fake_provider import Gate, stream, text_chunks
from tests.support.helpers import make_rojo, sqlite_plan
from tests.support.live_server import ApiClient

pytestmark = pytest.mark.django_db(transaction=True)

PER_MINUTE = "You have sent 20 messages in the last minute, the most allowed; "
AT_ONCE = "You already have 3 replies running, the most allowed at once; "


@pytest.fixture
def rojo(fake_provider, settings):
    settings.ROJO_PROVIDER_RETRIES = 0
    return make_rojo(fake_provider.base_url)


def post_at_once(
    clients: list[ApiClient], project, rojo, answered: threading.Barrier | None = None
) -> list[tuple[int, str]]:
    """Each client sends one new chat, all released together; (status, body) of each, the
    body read to its end (a started turn's whole stream), once every client waited at
    `answered` (if given) with its answer's status."""
    barrier = threading.Barrier(len(clients), timeout=30)
    answers: list[tuple[int, str]] = []

    def send(client: ApiClient) -> None:
        barrier.wait()
        with client.chat_stream(project.pk, rojo=rojo.slug, message="Go") as response:
            if answered is not None:
                answered.wait()
            answers.append((response.status_code, response.read().decode()))

    threads = [threading.Thread(target=send, args=(client,)) for client in clients]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(answers) == len(clients)
    return answers


def assert_started(answers, count: int, limited: str) -> None:
    """`count` turns started and ran; every other message was refused, and left nothing."""
    assert Counter(status for status, _ in answers) == {200: count, 429: len(answers) - count}
    for status, body in answers:
        if status == 200:
            assert body.rstrip().endswith("event: DONE\ndata: {}"), body[-200:]
        else:
            assert limited in body
    assert TurnRecord.objects.count() == count
    assert Conversation.objects.count() == count
    assert Message.objects.filter(role=Message.Role.USER).count() == count
    assert not Conversation.objects.filter(turn_id__isnull=False).exists()


def test_forty_parallel_messages_start_at_most_the_per_minute_limit(
    client_for, users, project, rojo, fake_provider, settings
):
    """Before, 40 parallel messages of one user started 38 turns against a limit of 20."""
    settings.ROJO_USER_MESSAGES_PER_MINUTE = 20
    settings.ROJO_USER_CONCURRENT_TURNS = 0
    fake_provider.add(*[stream(*text_chunks("Hi.")) for _ in range(20)])
    clients = [client_for(users["editor"]) for _ in range(40)]

    answers = post_at_once(clients, project, rojo)

    assert_started(answers, 20, PER_MINUTE)


def test_ten_parallel_slow_turns_start_at_most_the_concurrent_limit(
    client_for, users, project, rojo, fake_provider, settings
):
    """Before, 10 parallel slow turns all started against a limit of 3. The replies hold
    until all ten messages were answered (before, 3 s replies a loaded server could end
    before the last messages came, which then started)."""
    settings.ROJO_USER_MESSAGES_PER_MINUTE = 0
    settings.ROJO_USER_CONCURRENT_TURNS = 3
    clients = [client_for(users["editor"]) for _ in range(10)]
    all_answered = threading.Event()
    held = stream(Gate(all_answered), *text_chunks("w " * 30, pieces=30))
    fake_provider.add(held, held, held)

    answers = post_at_once(
        clients, project, rojo, threading.Barrier(len(clients), all_answered.set, timeout=60)
    )

    assert_started(answers, 3, AT_ONCE)


def test_the_limit_holds_across_two_server_processes(
    server_process, client_for, users, project, rojo, fake_provider, settings
):
    """Twenty messages to each of two processes on one database: twenty start in all."""
    settings.ROJO_USER_MESSAGES_PER_MINUTE = 20
    settings.ROJO_USER_CONCURRENT_TURNS = 0
    other = server_process(
        ROJO_USER_MESSAGES_PER_MINUTE="20",
        ROJO_USER_CONCURRENT_TURNS="0",
        ROJO_PROVIDER_RETRIES="0",
    )
    fake_provider.add(*[stream(*text_chunks("Hi.")) for _ in range(20)])
    clients = [client_for(users["editor"]) for _ in range(20)]
    clients += [client_for(users["editor"], base_url=other.base_url) for _ in range(20)]

    answers = post_at_once(clients, project, rojo)

    assert_started(answers, 20, PER_MINUTE)


def test_the_limits_are_counted_through_indexes_not_the_users_whole_history(
    users, project, settings
):
    """Each start counts the user's turns of the last minute and the running ones: read
    through an index each (rojos/migrations/0032), not every turn the user ever started
    and every conversation (13 ms a start with 100,000 turns, against 0.75 ms now)."""
    from django.db import connection, transaction
    from django.test.utils import CaptureQueriesContext

    from rojos.turns.limits import turn_limits_check

    if connection.vendor != "sqlite":
        pytest.skip("SQLite's plans: PostgreSQL plans a small table by its statistics")
    settings.ROJO_USER_MESSAGES_PER_MINUTE = 20
    settings.ROJO_USER_CONCURRENT_TURNS = 3
    user = users["editor"]
    conversation = Conversation.objects.create(
        project=project, rojo=make_rojo("http://127.0.0.1:9/v1"), user=user
    )
    for position in range(3):
        message = Message.objects.create(
            conversation=conversation, position=position, role="user", content="Go"
        )
        TurnRecord.objects.create(
            conversation=conversation, user_message=message, user=user, status="done"
        )
    with CaptureQueriesContext(connection) as queries, transaction.atomic():
        turn_limits_check(user=user)
    counts = [q["sql"] for q in queries if "COUNT(" in q["sql"]]
    assert len(counts) == 2
    for sql in counts:
        sqlite_plan(sql, table="rojos_turnrecord", ways=("started>", "turnrecord_running"))
