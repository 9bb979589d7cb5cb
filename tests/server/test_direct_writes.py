"""A streamed response's parts, written by the task that produces them where the server lets it.

The response hands its body's bytes to the server as they are, unless a middleware replaced
the content: then Django's own iteration (make_bytes) comes back, and no direct writes. A
direct write goes through the response's own `send`; one that has to wait after all is
finished in a task of its own, and the response's next write waits for it; one that fails
leaves the part to the response's task.
"""

import asyncio

import pytest

from roject.server.direct_writes import DirectStream, DirectWriter
from rojos.turns.registry import turn_get
from tests.support.fake_provider import stream, text_chunks
from tests.support.helpers import make_rojo
from tests.support.live_server import parse_sse, wait_until


async def _parts(*parts):
    for part in parts:
        yield part


async def test_the_server_iterates_the_body_itself():
    body = _parts(b"event: CHAT\n", b"data: {}\n\n")
    response = DirectStream(body, content_type="text/event-stream")

    assert aiter(response) is body
    assert [part async for part in aiter(response)] == [b"event: CHAT\n", b"data: {}\n\n"]


async def test_content_a_middleware_replaced_is_made_bytes_as_django_does_and_not_written():
    response = DirectStream(
        _parts(b"unused"), content_type="text/event-stream", write_ready=lambda: True
    )
    response.streaming_content = _parts("text, not bytes", b"bytes")
    response.bind(lambda message: None)

    assert response.writer is None
    assert [part async for part in aiter(response)] == [b"text, not bytes", b"bytes"]


async def test_without_the_servers_word_nothing_is_written_directly():
    response = DirectStream(_parts(), content_type="text/event-stream")  # daphne, say
    response.bind(lambda message: None)
    assert response.writer is None


async def test_a_write_that_cannot_wait_goes_out_in_the_callers_task():
    sent, tasks = [], []

    async def send(message):
        tasks.append(asyncio.current_task())
        sent.append(message)

    writer = DirectWriter(send, lambda: True)
    assert writer.write(b"data: 1\n\n")
    assert sent == [{"type": "http.response.body", "body": b"data: 1\n\n", "more_body": True}]
    assert tasks == [asyncio.current_task()]
    await writer.settled()


async def test_while_the_server_would_wait_the_response_writes_itself():
    sent = []

    async def send(message):
        sent.append(message)

    writer = DirectWriter(send, lambda: False)
    assert not writer.write(b"data: 1\n\n")
    assert sent == []


async def test_a_write_that_waits_after_all_is_finished_before_the_next():
    room = asyncio.Event()
    sent = []

    async def send(message):
        await room.wait()
        sent.append(message["body"])

    writer = DirectWriter(send, lambda: True)
    assert writer.write(b"first")  # taken: it goes out once there is room
    assert not writer.write(b"second")  # the response's task writes this one, after
    settling = asyncio.ensure_future(writer.settled())
    await asyncio.sleep(0)
    assert not settling.done() and sent == []
    room.set()
    await asyncio.wait_for(settling, 1)
    assert sent == [b"first"]
    assert writer.write(b"third")  # the way is free again
    assert sent == [b"first", b"third"]


async def test_a_failed_write_leaves_every_part_to_the_response():
    calls = []

    async def send(message):
        calls.append(message["body"])
        raise RuntimeError("Response content longer than Content-Length")

    writer = DirectWriter(send, lambda: True)
    assert not writer.write(b"a")
    assert not writer.write(b"b")
    assert calls == [b"a"]  # the response's own write meets the failure, in its own task


@pytest.mark.django_db(transaction=True)
def test_over_uvicorn_a_chats_chunks_are_written_by_its_turn_every_one_numbered(
    client_for, users, project, fake_provider
):
    """Against the live server: while the client reads, the chat's response waits as a
    direct follower of its turn (the turn's task writes), and the client gets every event,
    in order, each numbered as published, the text whole."""
    fake_provider.add(stream(*text_chunks("one two three four five six", pieces=6), delay=0.2))
    rojo = make_rojo(fake_provider.base_url, tools=[], approval_tools=[])
    client = client_for(users["editor"])
    with client.chat_stream(project.pk, rojo=rojo.pk, message="Count") as response:
        events = parse_sse(response.iter_lines())
        start = next(events)
        first = next(events)
        assert (start.type, first.type) == ("START", "CHAT")
        turn = turn_get(start.data["conversation"])
        wait_until(lambda: turn._direct)  # parked, written to by the turn
        rest = list(events)
    got = [start, first, *rest]
    assert [event.id for event in got] == list(range(1, len(got) + 1))
    assert [event.type for event in got] == ["START", *["CHAT"] * 6, "DONE"]
    assert "".join(event.data.get("text", "") for event in got) == "one two three four five six"
