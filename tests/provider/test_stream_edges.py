"""Whole turns over streams that are legal, or common, but rare: what a wire walk found.

Each case writes the provider's bytes as sent, drives a turn through the chat endpoint, and
checks the events the page receives, the messages stored, and the request that follows.
"""

import json

import pytest

from tests.provider.test_provider_wires import chat, data, delta, made, seen, sent_back
from tests.support.fake_provider import HttpError, Pause, http_error, stream, text_chunks
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


def labelled(kind: str, body: str) -> HttpError:
    """A 200 whose body is `body`, whatever it is, labelled `kind`."""
    return HttpError(status=200, body=body, headers={"content-type": kind})


COMPLETION = {
    "id": "chatcmpl-whole",
    "object": "chat.completion",
    "created": 1_750_000_000,
    "model": MODEL,
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": "Making alpha.",
                "tool_calls": [{k: v for k, v in CALL.items() if k != "index"}],
            },
            "finish_reason": "tool_calls",
        }
    ],
    "usage": {"prompt_tokens": 120, "completion_tokens": 9, "total_tokens": 129},
}


@pytest.mark.parametrize(
    ("kind", "body"),
    [
        (
            "application/json",
            data(delta(MODEL, {"role": "assistant", "content": "Making alpha."}))
            + data(delta(MODEL, {"tool_calls": [CALL]}, "tool_calls"))
            + "data: [DONE]\n\n",
        ),
        ("application/json", json.dumps(COMPLETION)),
        ("text/event-stream", "\n" + json.dumps(COMPLETION, indent=2)),
    ],
    ids=["stream-labelled-json", "completion-labelled-json", "completion-labelled-stream"],
)
def test_a_body_is_read_as_what_it_begins_with_whatever_its_label(
    client_for, users, project, rojo, fake_provider, kind, body
):
    """A proxy labels a stream application/json; a server that ignored stream=true answers
    one whole completion, under either label. A body that begins with `data:` is read as a
    stream, one that begins with `{` as one completion: the turn runs the same."""
    fake_provider.add(labelled(kind, body), stream(text_chunks("It is there.")))

    made_alpha(client_for, users, project, rojo, fake_provider)


def test_an_error_object_labelled_a_stream_is_the_providers_error(
    client_for, users, project, rojo, fake_provider
):
    """A 200 with an error object for its body, labelled text/event-stream: the user reads
    the provider's words (not that the response ended before it finished); nothing but the
    message is stored, and the next message goes out as usual."""
    error = {"error": {"message": "No endpoints found for any-model.", "code": 404}}
    fake_provider.add(labelled("text/event-stream", json.dumps(error)))

    events, history = chat(client_for, users, project, rojo, message="List the files.")

    assert seen(events) == [("START",), ("ERROR",), ("DONE",)]
    message = events[1].data["message"]
    assert "No endpoints found for any-model." in message
    assert "ended before it finished" not in message
    assert [m.role for m in history] == ["user"]


def test_a_finish_reason_error_with_no_error_object_is_an_error_that_keeps_the_text(
    client_for, users, project, rojo, fake_provider
):
    """A response that ends with finish reason "error" and no error object (a gateway whose
    upstream failed): the turn ends in an error, not a reply; the text shown so far is kept
    and goes back in the next request; the call that came before it never runs."""
    failed = delta(MODEL, {"content": ""}, "error")
    fake_provider.add(
        stream(
            data(delta(MODEL, {"role": "assistant", "content": "Making alpha."})),
            data(delta(MODEL, {"tool_calls": [CALL]})),
            data(failed),
        ),
        stream(text_chunks("Here.")),
    )
    client = client_for(users["editor"])

    events, history = chat(client_for, users, project, rojo, message="Make alpha.")

    assert seen(events) == [("START",), ("CHAT", "Making alpha."), ("ERROR",), ("DONE",)]
    assert 'finish reason "error"' in events[-2].data["message"]
    assert not made(project, "alpha")
    assert [(m.role, m.content, m.tool_calls) for m in history] == [
        ("user", "Make alpha.", None), ("assistant", "Making alpha.", None)
    ]  # fmt: skip
    conversation = events[0].data["conversation"]
    again = client.chat(project.pk, rojo=rojo.slug, message="Again.", conversation=conversation)
    assert seen(again) == [("START",), ("CHAT", "Here."), ("DONE",)]
    sent = [(m["role"], m.get("content")) for m in fake_provider.requests[1]["messages"]]
    assert sent[-3:] == [("user", "Make alpha."), ("assistant", "Making alpha."),
                         ("user", "Again.")]  # fmt: skip


@pytest.mark.parametrize(
    "late",
    [
        data({"error": {"message": "Usage accounting is unavailable.", "code": 500}}),
        'error: {"code": 500, "message": "Usage accounting is unavailable."}\n\n',
        "error: Usage accounting is unavailable.\n\n",
    ],
    ids=["error-object", "llama-cpp-error-line", "error-line-not-json"],
)
def test_an_error_after_the_finish_reason_leaves_the_finished_response_whole(
    client_for, users, project, rojo, fake_provider, late
):
    """An error after the response's finish reason (where its usage chunk would come): the
    response had finished, its text and call whole, so the call runs and the turn goes on,
    as after a connection that breaks there. The user is told, in a NOTICE after the reply
    and before its call, in the provider's words; it is stored with the reply (never sent
    back to the provider), and the reopened conversation shows it in the same place."""
    fake_provider.add(
        stream(
            data(delta(MODEL, {"role": "assistant", "content": "Making alpha."})),
            data(delta(MODEL, {"tool_calls": [CALL]}, "tool_calls")),
            late,
        ),
        stream(text_chunks("It is there.")),
    )

    events, history = made_alpha(client_for, users, project, rojo, fake_provider)

    notices = [event.data for event in events if event.type == "NOTICE"]
    assert [notice["code"] for notice in notices] == ["late_error"]
    assert "Usage accounting is unavailable." in notices[0]["message"]
    assert "whole and kept" in notices[0]["message"]
    assert notices[0]["message"] == (  # the provider's words, not our sentence around them
        "After this reply had finished, the provider reported an error: Usage accounting is "
        "unavailable. The reply is whole and kept."
    )
    assert kinds(events) == ["START", "CHAT", "NOTICE", "TOOL_CALL", "TOOL_RESULT", "CHAT", "DONE"]
    assert history[1].extra["late_error"] == notices[0]["message"]
    assert "Usage accounting" not in json.dumps(fake_provider.requests[1])
    conversation = events[0].data["conversation"]
    editor = client_for(users["editor"])
    reopened = editor.get(f"/api/conversations/{conversation}").json()
    assert kinds(reopened["events"]) == kinds(events)
    assert [e["data"] for e in reopened["events"] if e["type"] == "NOTICE"] == notices
    markdown = editor.get(
        f"/api/conversations/{conversation}/export", params={"format": "markdown"}
    ).text
    assert f"> **Note:** {notices[0]['message']}" in markdown


@pytest.mark.parametrize(
    ("finish", "told"),
    [("stop", ""), ("content_filter", " (the provider's finish reason: content_filter)")],
)
def test_an_empty_reply_is_said_to_be_one(
    client_for, users, project, rojo, fake_provider, finish, told
):
    """A response that finishes with no text, thinking or call: before, the turn ended with
    nothing shown at all. A NOTICE says so, stored with the reply as a late error's is."""
    fake_provider.add(
        stream(
            data(delta(MODEL, {"role": "assistant", "content": ""})),
            data(delta(MODEL, {}, finish)),
        )
    )
    client = client_for(users["editor"])

    events = client.chat(project.pk, rojo=rojo.slug, message="Hello?")

    assert kinds(events) == ["START", "NOTICE", "DONE"]
    (notice,) = [event.data for event in events if event.type == "NOTICE"]
    assert notice == {
        "message": f"The model's reply was empty{told}: no text and no tool call. Send the "
        "message again, or try another model.",
        "code": "empty_reply",
    }
    conversation = events[0].data["conversation"]
    reopened = client.get(f"/api/conversations/{conversation}").json()
    assert [e["data"] for e in reopened["events"] if e["type"] == "NOTICE"] == [notice]


def test_a_reply_whose_text_went_to_a_draft_before_its_finish_is_not_called_empty(
    client_for, users, project, rojo, fake_provider, settings
):
    """A draft takes the text so far from the reply being read; a finish that comes after
    a draft finds no text since it, and the reply is not empty for that."""
    settings.ROJO_DRAFT_SECONDS = 0  # every read's text to a draft
    fake_provider.add(
        stream(
            data(delta(MODEL, {"role": "assistant", "content": "All of it."})),
            data(delta(MODEL, {}, "stop")),
            delay=0.2,  # each chunk in its own read, the draft written before the finish
        )
    )

    events = client_for(users["editor"]).chat(project.pk, rojo=rojo.slug, message="Hello?")

    assert kinds(events) == ["START", "CHAT", "DONE"]


def kinds(events) -> list[str]:
    """The events' types as the page shows them: a reply's text once, forming calls left out
    (live events or a reopened conversation's, as dicts)."""
    shown: list[str] = []
    for event in events:
        kind = event["type"] if isinstance(event, dict) else event.type
        if kind != "TOOL_CALL_DELTA" and not (kind == "CHAT" and shown[-1:] == ["CHAT"]):
            shown.append(kind)
    return shown


def legacy(function: dict, finish: str | None = None) -> dict:
    """A chunk with a `function_call` delta: the shape of a call from before `tool_calls`."""
    return delta(MODEL, {"function_call": function}, finish)


LEGACY_WHOLE = {
    **COMPLETION,
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": "Making alpha.",
                "function_call": {"name": "create_directory", "arguments": '{"path": "alpha"}'},
            },
            "finish_reason": "function_call",
        }
    ],
}


@pytest.mark.parametrize("shape", ["streamed", "whole"])
def test_a_legacy_function_call_is_read_as_a_tool_call(
    client_for, users, project, rojo, fake_provider, shape
):
    """An old server (or a proxy in front of one) answers with `function_call`, OpenAI's shape
    of one call before `tool_calls`: streamed, its name then its arguments in fragments and
    finish reason "function_call"; or whole, in a non-streamed completion. The call runs as
    a tool call, with an id of its own, and goes back in the next request as one."""
    if shape == "streamed":
        first = stream(
            data(delta(MODEL, {"role": "assistant", "content": "Making alpha."})),
            data(legacy({"name": "create_directory", "arguments": ""})),
            data(legacy({"arguments": '{"path": '})),
            data(legacy({"arguments": '"alpha"}'})),
            data(delta(MODEL, {}, "function_call")),
        )
    else:
        first = labelled("application/json", json.dumps(LEGACY_WHOLE))
    fake_provider.add(first, stream(text_chunks("It is there.")))

    _events, history = made_alpha(client_for, users, project, rojo, fake_provider)

    assert history[1].tool_calls[0]["id"].startswith("call_")
    assert "function_call" not in json.dumps(fake_provider.requests[1])


@pytest.mark.parametrize(
    "message",
    ["tools param requires --jinja flag", "tool_choice param requires --jinja flag",
     "Unsupported param: tool_choice"],
)  # fmt: skip
def test_a_server_not_set_up_for_tools_is_asked_once(
    client_for, users, project, rojo, fake_provider, settings, message
):
    """llama-server started without --jinja answers a request with tools 500, in words that
    say so. The SDK retries a 500; this one no retry helps (only the server's operator
    can), so it goes once and the user reads the server's words at once."""
    settings.ROJO_PROVIDER_RETRIES = 2
    body = {"error": {"code": 500, "message": message, "type": "server_error"}}
    fake_provider.responder = lambda _request: http_error(500, body)

    events, history = chat(client_for, users, project, rojo, message="List the files.")

    assert seen(events) == [("START",), ("ERROR",), ("DONE",)]
    assert message in events[1].data["message"]
    assert len(fake_provider.requests) == 1
    assert [m.role for m in history] == ["user"]


@pytest.mark.parametrize("end", ["", "\r"], ids=["no-line-end", "lone-cr"])
def test_a_last_line_the_bodys_end_ends_is_read(
    client_for, users, project, rojo, fake_provider, end
):
    """A server that closes the body right after its last data line, with no line end (or
    a lone CR) and no [DONE]: that line, here the one with the calls and the finish reason,
    is read like any other; the turn was cut short as "ended before it finished"."""
    last = delta(MODEL, {"tool_calls": [CALL]}, "tool_calls")
    fake_provider.add(
        stream(
            data(delta(MODEL, {"role": "assistant", "content": "Making alpha."})),
            f"data: {json.dumps(last)}{end}",
            done=False,
        ),
        stream(text_chunks("It is there.")),
    )

    made_alpha(client_for, users, project, rojo, fake_provider)
