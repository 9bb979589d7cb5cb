"""The relay between server processes survives Redis: its read timeouts, a restart that
forgets every group and message, and an outage. Two server processes on the test database
and a Redis of the test's own (tests/support/own_services.py), killed and started again.

What must hold: an acknowledged Stop or approval reached the turn; one that could not be
delivered is a 503 that says to try again; a follower through the other process gets the
whole reply and DONE, or a clear ERROR while the relay is down.
"""

import threading
import time

import httpx2
import pytest

from roject.storage import project_root_create
from tests.support.fake_provider import Gate, stream, text_chunks, tool_call_chunks
from tests.support.helpers import make_rojo
from tests.support.live_server import parse_sse, read_until

pytestmark = pytest.mark.django_db(transaction=True)


def _two(server_process, own_redis, **settings):
    env = {
        "REDIS_URL": own_redis.url,
        "ROJO_PROVIDER_RETRIES": "0",
        "ROJO_APPROVAL_TIMEOUT": "60",
        "ROJO_RELAY_CONFIRM_SECONDS": "3",
        **settings,
    }
    return server_process(**env), server_process(**env)


@pytest.fixture
def two_processes(server_process, own_redis):
    """Two server processes on the test's own Redis: `one` runs the turns, `two` relays."""
    return _two(server_process, own_redis)


@pytest.fixture
def two_processes_default_timeouts(server_process, own_redis):
    """The same with a Redis read timeout under the layer's 5 s blocking read (redis-py's
    default, 5 s, equals it, and timed out now and then): every idle read times out, and the
    turn's listener and the relay must read again."""
    return _two(server_process, own_redis, ROJO_REDIS_SOCKET_TIMEOUT="2")


def overwrite(path: str) -> tuple[str, dict]:
    return ("write_text_content", {"path": path, "text": "new\n"})


def held_reply(*held: threading.Event):
    """A reply of 400 paced pieces that holds after each tenth piece until the next of `held`
    is set: what the test does meanwhile cannot race the reply's end, and each hold comes
    before a follower falls far enough behind to get the text joined in fewer events."""
    chunks = text_chunks("w " * 400, pieces=400)
    for place, opened in reversed(list(enumerate(held, start=1))):
        chunks.insert(10 * place, Gate(opened))
    return stream(*chunks, delay=0.05)


def until_not_503(send, timeout: float = 20) -> httpx2.Response:
    """Send until the answer is not a 503; each 503 must say to try again."""
    deadline = time.monotonic() + timeout
    while True:
        response = send()
        if response.status_code != 503:
            return response
        assert "try again" in response.json()["detail"]
        assert time.monotonic() < deadline, "the relay never came back"
        time.sleep(0.3)


def test_after_a_redis_restart_approve_reattach_and_stop_reach_the_turn(
    two_processes, own_redis, client_for, users, project, fake_provider
):
    """Redis killed and restarted while a call waits for approval: the approval through the
    other process is acknowledged only once the turn has it, a re-attach there gets the rest
    of the reply, and a Stop there stops it."""
    one, two = two_processes
    root = project_root_create(project.pk)
    (root / "notes.txt").write_text("old\n")
    rojo = make_rojo(fake_provider.base_url)
    reattached, stopping = threading.Event(), threading.Event()
    fake_provider.add(
        stream(*tool_call_chunks([overwrite("notes.txt")], arguments="whole")),
        held_reply(reattached, stopping),
    )
    on_one = client_for(users["editor"], base_url=one.base_url)
    on_two = client_for(users["editor"], base_url=two.base_url)

    with on_one.chat_stream(project.pk, rojo=rojo.slug, message="Go") as response:
        events = parse_sse(response.iter_lines())
        seen = read_until(events, "APPROVAL_REQUIRED")
        conversation, call = seen[0].data["conversation"], seen[-1].data["id"]
        own_redis.kill()
        own_redis.start()

        approved = until_not_503(
            lambda: on_two.post(
                f"/api/conversations/{conversation}/approve", json={"call": call, "approve": True}
            )
        )
        assert approved.json() == {"delivered": True}
        seen += read_until(events, "CHAT", count=3)
        assert [e.data["ok"] for e in seen if e.type == "TOOL_RESULT"] == [True]
        assert (root / "notes.txt").read_text() == "new\n"

        with on_two.http.stream(
            "GET",
            f"/api/conversations/{conversation}/stream",
            headers={"Last-Event-ID": str(seen[-1].id)},
            timeout=30,
        ) as follow:
            reattached.set()
            followed = parse_sse(follow.iter_lines())
            relayed = read_until(followed, "CHAT", count=3)
            stopped = until_not_503(lambda: on_two.post(f"/api/conversations/{conversation}/stop"))
            stopping.set()
            relayed += list(followed)
        rest = list(events)

    assert stopped.json() == {"stopping": True}
    assert relayed[0].id == seen[-1].id + 1
    assert [e.type for e in relayed][-2:] == ["ERROR", "DONE"]
    assert relayed[-2].data["code"] == "stopped"
    assert [e.type for e in rest][-2:] == ["ERROR", "DONE"]


def test_a_remote_follower_of_a_turn_waiting_20s_for_approval_keeps_following(
    two_processes_default_timeouts, client_for, users, project, fake_provider
):
    """With Redis reads that time out while idle (redis-py's default 5 s timeout, the same
    as the layer's blocking read, did now and then; here every time), a re-attach through
    the other process to a turn waiting 20 s for approval stays open and gets the rest,
    through DONE, once the call is approved."""
    one, two = two_processes_default_timeouts
    root = project_root_create(project.pk)
    (root / "notes.txt").write_text("old\n")
    rojo = make_rojo(fake_provider.base_url)
    fake_provider.add(
        stream(*tool_call_chunks([overwrite("notes.txt")], arguments="whole")),
        stream(*text_chunks("Done.")),
    )
    on_one = client_for(users["editor"], base_url=one.base_url)
    on_two = client_for(users["editor"], base_url=two.base_url)

    with on_one.chat_stream(project.pk, rojo=rojo.slug, message="Go") as response:
        seen = read_until(parse_sse(response.iter_lines()), "APPROVAL_REQUIRED")
    conversation, call = seen[0].data["conversation"], seen[-1].data["id"]
    with on_two.http.stream(
        "GET",
        f"/api/conversations/{conversation}/stream",
        headers={"Last-Event-ID": str(seen[-1].id)},
        timeout=40,
    ) as follow:
        time.sleep(20)
        answers = []

        def approve() -> httpx2.Response:
            answers.append(
                on_two.post(
                    f"/api/conversations/{conversation}/approve",
                    json={"call": call, "approve": True},
                )
            )
            return answers[-1]

        # A read that timed out can take the decision (or its acknowledgement) with it: the
        # answer is then a 503 "try again", never a delivery it cannot vouch for, and the
        # user's second try goes through. It is delivered on a try, or, when only the
        # acknowledgement was lost, the next try finds the call decided.
        approved = until_not_503(approve)
        rest = list(parse_sse(follow.iter_lines()))

    if len(answers) == 1:
        assert approved.json() == {"delivered": True}
    else:
        assert approved.json() == {"delivered": True} or approved.status_code == 409
    kinds = [e.type for e in rest]
    if kinds[0] == "START":
        # The follower asked its relay again (after 12 s of silence) just as the turn ended,
        # and its process, done with the turn, no longer answers: the follower then gets the
        # stored turn whole, from a START numbered 1 (rojos.turns.ended_events: stored_turn_events).
        assert rest[0].id == 1
        assert "TOOL_CALL" in kinds and kinds[-3:] == ["TOOL_RESULT", "CHAT", "DONE"]
    else:
        assert kinds == ["TOOL_RESULT", "CHAT", "DONE"]
        assert rest[0].id == seen[-1].id + 1


def test_while_redis_is_down_a_reattach_is_told_and_stop_says_try_again(
    two_processes, own_redis, client_for, users, project, fake_provider
):
    """Redis down: a re-attach through the other process gets a 200 with one clear ERROR
    (code `unavailable`, a retry hint) rather than a body cut off; Stop answers 503 "try
    again", never `stopping` for a message that went nowhere; once Redis is back, it works."""
    one, two = two_processes
    rojo = make_rojo(fake_provider.base_url)
    fake_provider.add(held_reply(stopping := threading.Event()))
    on_one = client_for(users["editor"], base_url=one.base_url)
    on_two = client_for(users["editor"], base_url=two.base_url)

    with on_one.chat_stream(project.pk, rojo=rojo.slug, message="Talk") as response:
        events = parse_sse(response.iter_lines())
        seen = read_until(events, "CHAT", count=2)
        conversation = seen[0].data["conversation"]
        own_redis.kill()

        reattached = on_two.get(
            f"/api/conversations/{conversation}/stream",
            headers={"Last-Event-ID": str(seen[-1].id)},
        )
        stop_down = on_two.post(f"/api/conversations/{conversation}/stop")
        own_redis.start()
        stopped = until_not_503(lambda: on_two.post(f"/api/conversations/{conversation}/stop"))
        stopping.set()
        rest = list(events)

    assert reattached.status_code == 200
    told = list(parse_sse(reattached.text.splitlines()))
    assert [(e.type, e.data["code"], e.data["retry"]) for e in told] == [
        ("ERROR", "unavailable", 2)
    ]
    assert told[0].id is None  # Last-Event-ID stays where it was
    assert stop_down.status_code == 503 and "try again" in stop_down.json()["detail"]
    assert stopped.json() == {"stopping": True}
    assert [e.type for e in rest][-2:] == ["ERROR", "DONE"]
    assert rest[-2].data["code"] == "stopped"
