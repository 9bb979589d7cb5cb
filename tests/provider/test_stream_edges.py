"""Whole turns over streams that are legal, or common, but rare: what a wire walk found.

Each case writes the provider's bytes as sent, drives a turn through the chat endpoint, and
checks the events the page receives, the messages stored, and the request that follows.
"""

import json

import pytest

from tests.provider.test_provider_wires import chat, data, delta, made, seen, sent_back
from tests.support.fake_provider import Pause, stream, text_chunks
from tests.support.helpers import make_rojo

pytestmark = pytest.mark.django_db(transaction=True)

MODEL = "any-model"
CALL = {
    "index": 0,
    "id": "call_alpha",
    "type": "function",
    "function": {"name": "create_directory", "arguments": '{"path": "alpha"}'},
}
MADE_ALPHA = [
    ("START",),
    ("CHAT", "Making alpha."),
    ("TOOL_CALL", "create_directory", {"path": "alpha"}),
    ("TOOL_RESULT", "create_directory", True),
    ("CHAT", "It is there."),
    ("DONE",),
]


@pytest.fixture
def rojo(fake_provider, settings):
    settings.ROJO_PROVIDER_RETRIES = 0
    return make_rojo(fake_provider.base_url)


def made_alpha(client_for, users, project, rojo, fake_provider):
    """A turn whose first response says "Making alpha." and calls create_directory: it
    ran, showed and stored whole, and the next request sends the text and the call back."""
    events, history = chat(client_for, users, project, rojo, message="Make alpha.")
    assert seen(events) == MADE_ALPHA
    assert made(project, "alpha")
    assert [m.role for m in history] == ["user", "assistant", "tool", "assistant"]
    assert history[1].content == "Making alpha."
    assert [c["function"]["name"] for c in history[1].tool_calls] == ["create_directory"]
    request = fake_provider.requests[1]
    sent_back(history, request)
    assert request["messages"][1]["content"] == "Making alpha."
    return events, history


@pytest.mark.parametrize("cut", [None, 1, 2], ids=["whole", "cut-after-1", "cut-after-2"])
def test_a_byte_order_mark_before_the_first_line_is_ignored(
    client_for, users, project, rojo, fake_provider, cut
):
    """A UTF-8 byte-order mark at the start of the body, which SSE says to ignore (some
    Windows-hosted proxies write one), possibly in a write of its own or cut in two: the
    first chunk, right behind it, is read like any other."""
    bom = "\ufeff".encode()
    first = bom + data(delta(MODEL, {"role": "assistant", "content": "Making alpha."})).encode()
    head = [first] if cut is None else [first[:cut], first[cut:]]
    fake_provider.add(
        stream(*head, data(delta(MODEL, {"tool_calls": [CALL]}, "tool_calls"))),
        stream(text_chunks("It is there.")),
    )

    made_alpha(client_for, users, project, rojo, fake_provider)


def spread(chunk: dict, end: str = "\n") -> str:
    """One event over several data lines (a proxy that pretty-prints each chunk), each
    ending in `end`, and the blank line that ends it."""
    lines = json.dumps(chunk, indent=2).splitlines()
    return "".join(f"data: {line}{end}" for line in lines) + end


@pytest.mark.parametrize("last", ["blank-line", "body-end"])
def test_an_event_spread_over_several_data_lines_is_joined(
    client_for, users, project, rojo, fake_provider, last
):
    """SSE joins an event's data lines with a line end; it ends at a blank line (or at the
    body's end). Events spread so, one of them across two network writes (a pause between
    them), some in CRLF, between ordinary one-line events: each is read as one chunk."""
    text = spread(delta(MODEL, {"role": "assistant", "content": "Making alpha."}))
    finish = delta(MODEL, {}, "tool_calls")
    tail = [data(finish)] if last == "blank-line" else [spread(finish).rstrip("\n")]
    fake_provider.add(
        stream(
            text[:40],
            Pause(0.05),
            text[40:],
            spread(delta(MODEL, {"tool_calls": [CALL]}), "\r\n"),
            *tail,
            done=last == "blank-line",
        ),
        stream(text_chunks("It is there.")),
    )

    made_alpha(client_for, users, project, rojo, fake_provider)
