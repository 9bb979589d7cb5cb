"""Clients that do not read: they are disconnected, can re-attach, and cost little memory.

Against the live uvicorn server and the fake provider. A reply of 20,000 chunks of 300
characters (6 MB of text, about 6.7 MB on the wire: more than the kernel's buffers hold) goes
to a client that connects with a small receive buffer and then reads nothing.
"""

import socket
import time
from urllib.parse import urlsplit

import pytest

from rojos.models import Conversation
from rojos.turns.events import CATCH_UP_BYTES, JOIN_AFTER
from rojos.turns.registry import turn_get
from tests.support.fake_provider import stream, text_chunks
from tests.support.helpers import make_rojo
from tests.support.live_server import parse_sse, wait_until

pytestmark = pytest.mark.django_db(transaction=True)

CHUNKS = 20_000
TEXT = "".join(f"{n:06d}" + "abcdefghij" * 29 + "xyz " for n in range(CHUNKS))
CUTS = [len(TEXT) * i // CHUNKS for i in range(CHUNKS + 1)]


@pytest.fixture
def long_reply(fake_provider, settings):
    settings.ROJO_PROVIDER_RETRIES = 0
    fake_provider.add(stream(*text_chunks(TEXT, pieces=CHUNKS)))
    return make_rojo(fake_provider.base_url, tools=[], approval_tools=[])


def _same_text(got: str, want: str) -> None:
    """got == want, failing with where they part: pytest's own diff of megabytes of text
    runs for hours."""
    if got != want:
        at = next((i for i, (a, b) in enumerate(zip(got, want, strict=False)) if a != b), None)
        at = min(len(got), len(want)) if at is None else at
        pytest.fail(
            f"the text differs at {at} of {len(want)} characters (got {len(got)}): "
            f"{got[at : at + 40]!r} where {want[at : at + 40]!r} was due"
        )


def _caught_up(after: int, chats: list) -> None:
    """The CHAT events a follower gets after seq `after`: each numbered as its last chunk,
    so that the text up to each is exactly the reply's up to that seq, and in events of
    about CATCH_UP_BYTES (whole chunks of 300 bytes), not one a chunk nor all in one."""
    position = after
    for event in chats:
        assert event.id > position
        _same_text(event.data["text"], TEXT[CUTS[max(position - 1, 0)] : CUTS[event.id - 1]])
        assert len(event.data["text"].encode()) <= CATCH_UP_BYTES + (JOIN_AFTER + 1) * 300
        position = event.id
    assert position == CHUNKS + 1  # START is seq 1
    if CHUNKS + 1 - after <= JOIN_AFTER:  # close behind: each chunk as it came
        assert len(chats) == CHUNKS + 1 - after
    else:
        assert len(chats) <= len(TEXT[CUTS[max(after - 1, 0)] :].encode()) // CATCH_UP_BYTES + 1


def _cookies(client) -> str:
    return "; ".join(f"{k}={v}" for k, v in client.http.cookies.items())


def _connect_not_reading(base_url: str, client, path: str, body: bytes) -> socket.socket:
    """POST over a socket with a 4 KiB receive buffer, which the test then does not read."""
    url = urlsplit(base_url)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect((url.hostname, url.port))
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {url.netloc}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nAccept: text/event-stream\r\n"
        f"Cookie: {_cookies(client)}\r\nX-CSRFToken: {client.http.headers['X-CSRFToken']}\r\n"
        "Connection: close\r\n\r\n"
    )
    sock.sendall(head.encode() + body)
    return sock


def _read_all(sock: socket.socket) -> tuple[bytes, str]:
    """Everything the socket still gives, and how it ended (closed, reset, or timed out)."""
    sock.settimeout(15)  # long enough for a loaded machine: a live server sends or closes
    received = b""
    while True:
        try:
            piece = sock.recv(1 << 20)
        except ConnectionResetError:
            return received, "reset"
        except TimeoutError:
            return received, "timeout"
        if not piece:
            return received, "closed"
        received += piece


def _events(raw: bytes) -> list:
    """The complete SSE events of a (possibly cut) HTTP response, chunked encoding and all."""
    body = raw.partition(b"\r\n\r\n")[2]
    text, rest = b"", body
    while rest:
        size_line, _, rest = rest.partition(b"\r\n")
        try:
            size = int(size_line, 16)
        except ValueError:
            break
        if size == 0 or len(rest) < size + 2:
            text += rest[:size]
            break
        text, rest = text + rest[:size], rest[size + 2 :]
    complete = text.decode(errors="ignore").rpartition("\n\n")[0]
    return list(parse_sse((complete + "\n\n").split("\n")))


def test_a_client_that_reads_nothing_is_disconnected_and_can_re_attach(
    asgi_server, client_for, users, project, long_reply, settings
):
    """With ROJO_CLIENT_WRITE_TIMEOUT=1, the server drops a connection that reads nothing
    (the turn goes on and finishes); the client, reading what it got, re-attaches from its
    last id and gets exactly the rest of the text, then DONE."""
    settings.ROJO_CLIENT_WRITE_TIMEOUT = 1
    editor = client_for(users["editor"])
    body = b'{"rojo": "%s", "message": "Write a lot"}' % long_reply.slug.encode()
    sock = _connect_not_reading(asgi_server, editor, f"/api/projects/{project.pk}/chat", body)
    try:
        wait_until(lambda: Conversation.objects.filter(project=project).exists(), timeout=20)
        conversation = Conversation.objects.get(project=project)
        wait_until(lambda: not Conversation.objects.get(pk=conversation.pk).running, timeout=60)
        time.sleep(settings.ROJO_CLIENT_WRITE_TIMEOUT + 1.5)
        raw, ending = _read_all(sock)
    finally:
        sock.close()

    assert ending == "reset"  # reset, not closed: what the kernel held for it was dropped
    got = _events(raw)
    assert "DONE" not in [e.type for e in got]
    last = max([e.id for e in got if e.id] or [0])
    response = editor.get(
        f"/api/conversations/{conversation.pk}/stream", headers={"Last-Event-ID": str(last)}
    )
    rest = list(parse_sse(response.text.split("\n")))
    texts = [e.data["text"] for e in got + rest if e.type == "CHAT"]
    _same_text("".join(texts), TEXT)
    assert [e.type for e in rest][-1] == "DONE"
    _caught_up(last, [e for e in rest if e.type == "CHAT"])  # what it missed, in big events


def test_a_long_reply_is_kept_compactly_and_re_attaches_from_any_seq(
    client_for, users, project, long_reply
):
    """The 20,000 chunks are kept as one run (their text and two bytes each), not 20,000
    events; a re-attach after any seq gets exactly the text after it, in events of about
    CATCH_UP_BYTES each numbered as its last chunk, then DONE."""
    editor = client_for(users["editor"])
    events = editor.chat(project.pk, rojo=long_reply.slug, message="Write a lot")
    chats = [e for e in events if e.type == "CHAT"]
    _same_text("".join(e.data["text"] for e in chats), TEXT)
    conversation = events[0].data["conversation"]

    turn = turn_get(conversation)
    assert turn.events.entries() == 3  # START, the run of CHAT chunks, DONE
    # chunks of 300 bytes: two bytes each for its length, four for each 64th chunk's start
    assert turn.events.kept_bytes() == len(TEXT.encode()) + 2 * CHUNKS + 4 * -(-CHUNKS // 64)
    last_chunk = CHUNKS + 1  # START is seq 1
    for after in (1, 2, 3, 777, CHUNKS, last_chunk):
        response = editor.get(
            f"/api/conversations/{conversation}/stream", headers={"Last-Event-ID": str(after)}
        )
        rest = list(parse_sse(response.text.split("\n")))
        expected = TEXT[CUTS[after - 1] :]
        if expected:
            assert [e.type for e in rest] == ["CHAT"] * (len(rest) - 1) + ["DONE"]
            assert rest[-1].id == last_chunk + 1
            _same_text("".join(e.data["text"] for e in rest[:-1]), expected)
            _caught_up(after, rest[:-1])
        else:
            assert [e.type for e in rest] == ["DONE"]
