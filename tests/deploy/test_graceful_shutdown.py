"""A server process told to stop (SIGTERM, as an orchestrator does) under `manage.py serve`:
it takes no new turns, lets running replies finish within ROJO_SHUTDOWN_GRACE_SECONDS, ends
the rest as interrupted with their text kept, and exits; nothing is left running or locked."""

import signal
import threading

import httpx2
import pytest

from rojos.models import Conversation, Message, TurnRecord
from tests.support.fake_provider import Gate, Pause, stream, text_chunks
from tests.support.helpers import assert_history_valid, make_rojo, stored_history
from tests.support.live_server import ApiClient, parse_sse, read_until, wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def stopping(server) -> None:
    server.process.send_signal(signal.SIGTERM)


def test_a_running_reply_finishes_while_new_turns_are_sent_elsewhere(
    server_process, users, project, fake_provider
):
    """The reply holds until the other message was refused (before, a 2 s pause the test had
    to send it within: a reply ended first let the stopping server exit, refusing nothing)."""
    rojo = make_rojo(fake_provider.base_url)
    answered = threading.Event()
    fake_provider.add(stream(text_chunks("Finished ", pieces=1, finish=None), Gate(answered),
                             text_chunks("in time.")))  # fmt: skip
    server = server_process("serve", ROJO_SHUTDOWN_GRACE_SECONDS="60")
    client = ApiClient(server.base_url, users["editor"])
    with client.chat_stream(project.pk, rojo=rojo.pk, message="Go") as response:
        events = parse_sse(response.iter_lines())
        read_until(events, "CHAT")
        stopping(server)
        wait_until(lambda: httpx2.get(server.base_url + "/readyz", timeout=5).status_code == 503)

        refused = client.post(
            f"/api/projects/{project.pk}/chat", json={"rojo": rojo.pk, "message": "Another"}
        )
        answered.set()
        rest = list(events)

    assert refused.status_code == 503
    assert refused.headers["Retry-After"] == "2"
    assert "restarting" in refused.json()["detail"]
    assert refused.json()["code"] == "draining"  # the page sends it again (static/rojo/resend.js)
    assert [event.type for event in rest][-1] == "DONE"
    assert "ERROR" not in [event.type for event in rest]
    assert server.process.wait(timeout=30) == -signal.SIGTERM  # uvicorn ends as told, after
    record = TurnRecord.objects.get()
    assert record.status == TurnRecord.Status.DONE
    reply = Message.objects.filter(role="assistant").get()
    assert reply.content == "Finished in time."
    assert Message.objects.filter(content="Another").count() == 0  # never stored
    client.close()


def test_a_reply_longer_than_the_grace_ends_interrupted_with_its_text_kept(
    server_process, users, project, fake_provider
):
    rojo = make_rojo(fake_provider.base_url)
    fake_provider.add(stream(text_chunks("Kept so far.", finish=None), Pause(30.0),
                             text_chunks(" Never sent.")))  # fmt: skip
    server = server_process("serve", ROJO_SHUTDOWN_GRACE_SECONDS="1")
    client = ApiClient(server.base_url, users["editor"])
    with client.chat_stream(project.pk, rojo=rojo.pk, message="Go") as response:
        events = parse_sse(response.iter_lines())
        read_until(events, "CHAT")
        stopping(server)
        rest = list(events)

    assert [event.type for event in rest][-2:] == ["ERROR", "DONE"]
    assert rest[-2].data["code"] == "interrupted"
    assert server.process.wait(timeout=30) == -signal.SIGTERM  # uvicorn ends as told, after
    conversation = Conversation.objects.get()
    assert not conversation.running
    record = TurnRecord.objects.get()
    assert record.status == TurnRecord.Status.INTERRUPTED
    history = stored_history(conversation.pk)
    assert_history_valid(history)
    assert history[-1].content == "Kept so far."
    assert not history[-1].draft
    client.close()


def test_a_reply_whose_client_left_is_kept_when_its_server_stops(
    server_process, users, project, fake_provider
):
    """Turns outlive their connection: the one no client follows is not cut at once."""
    rojo = make_rojo(fake_provider.base_url)
    fake_provider.add(stream(text_chunks("Written while alone.", finish=None), Pause(30.0),
                             text_chunks(" Never sent.")))  # fmt: skip
    server = server_process("serve", ROJO_SHUTDOWN_GRACE_SECONDS="1")
    client = ApiClient(server.base_url, users["editor"])
    with client.chat_stream(project.pk, rojo=rojo.pk, message="Go") as response:
        read_until(parse_sse(response.iter_lines()), "CHAT")
    client.close()  # the client leaves; the turn goes on

    stopping(server)

    assert server.process.wait(timeout=30) == -signal.SIGTERM  # uvicorn ends as told, after
    record = TurnRecord.objects.get()
    assert record.status == TurnRecord.Status.INTERRUPTED
    conversation = Conversation.objects.get()
    assert not conversation.running
    assert stored_history(conversation.pk)[-1].content == "Written while alone."
