"""A re-attach is answered only from the turn it asks for (issue #31, point 7).

Two server processes on PostgreSQL and Redis, B (in process) and A. Message 1 goes through
B, which keeps its finished turn's log for a while; message 2 through A. The client drops
after 30 events of message 2 and re-attaches through B with `Last-Event-ID: 30`: it must get
the rest of message 2's reply (relayed from A), or message 2 whole once it ended, or ERROR
`interrupted` once A was killed: never the tail of message 1's reply from B's kept log.
"""

import contextlib
import os
import threading

import pytest
from django.db import connection

from rojos.turns.repair import INTERRUPTED_MESSAGE
from tests.support.fake_provider import Gate, stream, text_chunks
from tests.support.helpers import make_rojo
from tests.support.live_server import Event, parse_sse

pytestmark = pytest.mark.django_db(transaction=True)

FIRST = "one " * 40  # 42 events: START, 40 CHAT, DONE; its log outlives the turn on B
SECOND = "two " * 300  # about 15 s on A


@pytest.fixture
def start_a(server_process, settings):
    """Start process A beside the in-process B (with `env` added)."""
    if not os.environ.get("REDIS_URL") or connection.vendor != "postgresql":
        pytest.skip("runs with REDIS_URL and a PostgreSQL DATABASE_URL set")
    settings.ROJO_PROVIDER_RETRIES = 0
    return lambda **env: server_process(ROJO_PROVIDER_RETRIES="0", **env)


def chat_text(events: list[Event]) -> str:
    return "".join(event.data["text"] for event in events if event.type == "CHAT")


def first_through_b_second_on_a(on_b, on_a, project, fake_provider, held: threading.Event):
    """Message 1 through B (finished), message 2 through A (running, held after 40 of its
    pieces until `held` is set); the 30 events of message 2 the client saw before its
    connection dropped, and its conversation."""
    rojo = make_rojo(fake_provider.base_url)
    fake_provider.add(stream(*text_chunks(FIRST, pieces=40)))
    first = on_b.chat(project.pk, rojo=rojo.slug, message="First")
    assert chat_text(first) == FIRST and first[-1].id == 42
    conversation = first[0].data["conversation"]
    chunks = text_chunks(SECOND, pieces=300)
    chunks.insert(40, Gate(held))
    fake_provider.add(stream(*chunks, delay=0.05))
    payload = {"rojo": rojo.slug, "message": "Second", "conversation": conversation}
    with on_a.chat_stream(project.pk, **payload) as response:
        events = parse_sse(response.iter_lines())
        seen = [next(events) for _ in range(30)]
    assert seen[0].data["message"] != first[0].data["message"]
    return first, seen, conversation


def reattach(client, conversation: int, last_id: int, **params):
    """A re-attach's open stream (a context manager), `params` in its query."""
    return client.http.stream(
        "GET",
        f"/api/conversations/{conversation}/stream",
        params=params,
        headers={"Last-Event-ID": str(last_id)},
        timeout=40,
    )


def test_a_reattach_through_the_process_of_the_previous_turn_gets_the_current_one(
    start_a, client_for, users, project, fake_provider
):
    """While message 2 runs on A: a client naming no turn and one naming message 2 get the
    rest of message 2 after event 30, relayed; one that followed message 1 gets message 2
    whole, from its START. After it ended: message 2 as stored, from its START."""
    on_a = client_for(users["editor"], base_url=start_a().base_url)
    on_b = client_for(users["editor"])
    reattached = threading.Event()  # message 2 runs until the three re-attaches are answered
    first, seen, conversation = first_through_b_second_on_a(
        on_b, on_a, project, fake_provider, reattached
    )
    second = seen[0].data["message"]

    with contextlib.ExitStack() as stack:
        streams = [
            stack.enter_context(reattach(on_b, conversation, 30)),
            stack.enter_context(reattach(on_b, conversation, 30, turn=second)),
            stack.enter_context(reattach(on_b, conversation, 30, turn=first[0].data["message"])),
        ]
        reattached.set()
        unnamed, named, earlier = (list(parse_sse(s.iter_lines())) for s in streams)

    for rest in (unnamed, named):
        assert [e.id for e in rest] == list(range(31, 31 + len(rest)))
        assert chat_text(seen + rest) == SECOND
        assert rest[-1].type == "DONE" and not any(e.type == "ERROR" for e in rest)
    assert earlier[0].type == "START" and earlier[0].id == 1
    assert earlier[0].data["message"] == second
    assert chat_text(earlier) == SECOND and earlier[-1].type == "DONE"

    for params in ({}, {"turn": second}, {"turn": first[0].data["message"]}):
        with reattach(on_b, conversation, 30, **params) as response:
            ended = list(parse_sse(response.iter_lines()))
        assert (ended[0].type, ended[0].id, ended[0].data["message"]) == ("START", 1, second)
        assert chat_text(ended) == SECOND and ended[-1].type == "DONE"


def test_followers_of_a_killed_turn_are_told_it_was_interrupted_not_the_previous_reply(
    start_a, client_for, users, project, fake_provider
):
    """SIGKILL of A while message 2 runs: re-attaches through B made before the kill end
    with ERROR `interrupted` and DONE after event 30; one made after gets message 2 as
    stored, ended as interrupted. None gets any of message 1."""
    victim = start_a(ROJO_DRAFT_SECONDS="0.2")
    on_a = client_for(users["editor"], base_url=victim.base_url)
    on_b = client_for(users["editor"])
    killed = threading.Event()  # message 2 runs until A is killed
    _, seen, conversation = first_through_b_second_on_a(on_b, on_a, project, fake_provider, killed)
    second = seen[0].data["message"]

    with contextlib.ExitStack() as stack:
        streams = [
            stack.enter_context(reattach(on_b, conversation, 30)),
            stack.enter_context(reattach(on_b, conversation, 30, turn=second)),
        ]
        victim.kill()
        killed.set()
        followed = [list(parse_sse(s.iter_lines())) for s in streams]
    with reattach(on_b, conversation, 30) as response:
        after_kill = list(parse_sse(response.iter_lines()))

    for rest in [*followed, after_kill]:
        assert "one" not in chat_text(rest)
        assert [e.type for e in rest][-2:] == ["ERROR", "DONE"]
        assert rest[-2].data == {"message": INTERRUPTED_MESSAGE, "code": "interrupted"}
    for rest in followed:
        # Relayed after event 30 until the kill; then, if another follower had ended the
        # turn first, message 2 as stored, from its START (numbered 1: the whole turn again).
        restart = next((n for n, e in enumerate(rest) if e.type == "START"), len(rest))
        relayed, stored = rest[:restart], rest[restart:]
        assert [e.id for e in relayed] == list(range(31, 31 + len(relayed)))
        assert SECOND.startswith(chat_text(seen + relayed))
        if stored:
            assert (stored[0].id, stored[0].data["message"]) == (1, second)
            assert [e.id for e in stored] == list(range(1, 1 + len(stored)))
    # Ended by then (the followers found its process gone): message 2 as stored.
    assert (after_kill[0].type, after_kill[0].id) == ("START", 1)
    assert after_kill[0].data["message"] == second


def test_in_one_process_a_reattach_naming_an_earlier_turn_gets_the_current_one_whole(
    client_for, users, project, fake_provider
):
    """One process: a client that followed message 1 and names it gets message 2, running,
    from its START; one naming message 2 gets the rest after its id."""
    rojo = make_rojo(fake_provider.base_url)
    fake_provider.add(stream(*text_chunks(FIRST, pieces=40)))
    client = client_for(users["editor"])
    first = client.chat(project.pk, rojo=rojo.slug, message="First")
    conversation = first[0].data["conversation"]
    fake_provider.add(stream(*text_chunks(SECOND, pieces=300), delay=0.01))
    payload = {"rojo": rojo.slug, "message": "Second", "conversation": conversation}
    with client.chat_stream(project.pk, **payload) as response:
        seen = [e for _, e in zip(range(30), parse_sse(response.iter_lines()), strict=False)]
    second = seen[0].data["message"]

    with reattach(client, conversation, 30, turn=first[0].data["message"]) as response:
        earlier = list(parse_sse(response.iter_lines()))
    with reattach(client, conversation, seen[-1].id, turn=second) as response:
        rest = list(parse_sse(response.iter_lines()))

    assert (earlier[0].type, earlier[0].id, earlier[0].data["message"]) == ("START", 1, second)
    assert chat_text(earlier) == SECOND and earlier[-1].type == "DONE"
    assert rest[0].id > seen[-1].id and chat_text(seen + rest) == SECOND
