"""Provider failures: each ends the turn with a clear TurnError, keeps what the user saw, runs no
half-built call, leaves a valid history, and the conversation goes on with the next message."""

import asyncio
import itertools
import json
import socket
import threading

import pytest
from asgiref.sync import sync_to_async

from rojos.errors import ProviderError
from rojos.models import Rojo, UsageRecord
from tests.support.agent_run import API_KEY, rojo_for, run_turn, valid_history
from tests.support.fake_provider import (
    Gate,
    HttpError,
    Pause,
    Window,
    error_chunk,
    http_error,
    json_reply,
    prompt_tokens,
    stream,
    text_chunks,
    tool_call_chunks,
)

pytestmark = pytest.mark.django_db(transaction=True)

NOTE = [("write_text_content", {"path": "note.txt", "text": "A note that must not be written."})]


@pytest.fixture(autouse=True)
def no_retries(settings):
    settings.ROJO_PROVIDER_RETRIES = 0


def assert_failed(run, *fragments: str) -> str:
    """The turn ended with a ProviderError naming every fragment and never the API key."""
    assert isinstance(run.error, ProviderError), run.error
    message = str(run.error)
    for fragment in fragments:
        assert fragment in message, message
    assert API_KEY not in message
    assert not (run.root / "note.txt").exists()
    assert run.calls == [] and run.results == []
    return message


async def assert_continues(fake_provider, run, *, project, rojo, user) -> list[dict]:
    """A next message in the same conversation gets a normal reply; returns what was sent."""
    fake_provider.add(stream(text_chunks("Back again.")))
    again = await run_turn(
        project=project, rojo=rojo, user=user, message="Try again", conversation=run.conversation
    )
    assert again.error is None and again.text == "Back again."
    history = await valid_history(run.conversation)
    assert history[-1].content == "Back again."
    messages = fake_provider.requests[-1]["messages"]
    assert messages[-1]["role"] == "user" and messages[-1]["content"].endswith("Try again")
    roles = [m["role"] for m in messages]
    # Chat templates (vLLM's, llama.cpp's) refuse two user or two assistant messages in a row.
    assert not any(a == b != "tool" for a, b in itertools.pairwise(roles)), roles
    return messages


async def test_error_object_mid_stream_keeps_the_text_and_drops_the_half_call(
    fake_provider, project, users
):
    """data: {"error": ...} after some text and part of a call (OpenAI, vLLM)."""
    call = tool_call_chunks(NOTE, text_before="Writing the note.", finish=None)
    fake_provider.add(stream(call[:-3], error_chunk("The model is overloaded.", code=503)))
    rojo = await rojo_for(fake_provider)

    run = await run_turn(project=project, rojo=rojo, user=users["editor"])

    assert_failed(run, "mid-stream", "The model is overloaded.")
    assert run.text == "Writing the note." and set(run.kinds) == {"text"}
    history = await valid_history(run.conversation)
    assert [(m.role, m.content, m.tool_calls) for m in history] == [
        ("user", "Please help.", None),
        ("assistant", "Writing the note.", None),
    ]
    messages = await assert_continues(
        fake_provider, run, project=project, rojo=rojo, user=users["editor"]
    )
    assert messages[:2] == [
        {"role": "user", "content": "Please help."},
        {"role": "assistant", "content": "Writing the note."},
    ]


async def test_text_and_an_error_in_one_read_keep_the_text(fake_provider, project, users):
    """Chunks are handed over a read at a time: text that arrived in the same read as the
    error is still shown and stored."""
    text, _finish = text_chunks("Almost there.")
    error = error_chunk("The model is overloaded.")
    fake_provider.add(stream(f"data: {json.dumps(text)}\n\ndata: {json.dumps(error)}\n\n"))
    rojo = await rojo_for(fake_provider)

    run = await run_turn(project=project, rojo=rojo, user=users["editor"])

    assert_failed(run, "The model is overloaded.")
    assert run.text == "Almost there."
    history = await valid_history(run.conversation)
    assert [(m.role, m.content) for m in history] == [
        ("user", "Please help."),
        ("assistant", "Almost there."),
    ]


@pytest.mark.parametrize(
    "error",
    [
        error_chunk(f"upstream rejected key {API_KEY}"),
        f"error: upstream rejected key {API_KEY}\n\n",
    ],
    ids=["error-object", "llama-cpp-error-line"],
)
async def test_mid_stream_error_that_echoes_the_api_key_is_scrubbed(
    fake_provider, project, users, error
):
    """A gateway that repeats the key in a mid-stream error does not show it to the user."""
    fake_provider.add(stream(error))
    rojo = await rojo_for(fake_provider)

    run = await run_turn(project=project, rojo=rojo, user=users["editor"])

    assert_failed(run, "upstream rejected key ***")
    history = await valid_history(run.conversation)
    assert [m.role for m in history] == ["user"]


async def test_error_body_with_status_200_is_a_provider_error(fake_provider, project, users):
    """Some gateways answer 200 with {"error": ...} instead of a completion."""
    fake_provider.add(json_reply({"error": {"message": "No endpoints found for fake-model."}}))
    rojo = await rojo_for(fake_provider)

    run = await run_turn(project=project, rojo=rojo, user=users["editor"])

    assert_failed(run, "No endpoints found for fake-model.")
    history = await valid_history(run.conversation)
    assert [m.role for m in history] == ["user"]
    await assert_continues(fake_provider, run, project=project, rojo=rojo, user=users["editor"])


@pytest.mark.parametrize(
    ("kind", "page"),
    [
        ("text/html", "<!doctype html><html><body>Sign in</body></html>"),
        ("text/event-stream", "\n<!DOCTYPE html>\n<html><body>Sign in</body></html>"),
        ("text/event-stream; charset=utf-8", "<html><body>Sign in</body></html>"),
    ],
    ids=["html", "doctype-labelled-a-stream", "html-labelled-a-stream"],
)
async def test_a_web_page_with_status_200_names_the_base_url_to_check(
    fake_provider, project, users, kind, page
):
    """A base URL that names a site, not its API (a chat UI's root, a proxy's login page),
    answers every path with 200 and HTML, labelled a web page or (a captive portal) a stream:
    the user is told to check the base URL, not that the response ended before it
    finished."""
    fake_provider.add(HttpError(status=200, body=page, headers={"content-type": kind}))
    rojo = await rojo_for(fake_provider)

    run = await run_turn(project=project, rojo=rojo, user=users["editor"])

    assert_failed(run, "answered with a web page", "check the rojo's base URL")
    history = await valid_history(run.conversation)
    assert [m.role for m in history] == ["user"]
    await assert_continues(fake_provider, run, project=project, rojo=rojo, user=users["editor"])


@pytest.mark.parametrize(
    ("chunks", "said"),
    [
        (text_chunks("Half an ans", finish=None), "ended before it finished"),
        (tool_call_chunks(NOTE, text_before="Writing it.", finish=None), "ended before it"),
        ([], "answered with an empty body"),
    ],
    ids=["text", "complete-looking-call", "empty-body"],
)
async def test_stream_without_finish_reason_fails_and_runs_nothing(
    fake_provider, project, users, chunks, said
):
    """A stream that just ends (old llama.cpp errors, llama-cpp-python's empty 200) fails."""
    fake_provider.add(stream(chunks, done=bool(chunks)))
    rojo = await rojo_for(fake_provider)

    run = await run_turn(project=project, rojo=rojo, user=users["editor"])

    assert_failed(run, said)
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
    assert run.text == text
    history = await valid_history(run.conversation)
    assert [m.content for m in history[1:]] == ([text] if text else [])
    assert all(m.tool_calls is None for m in history)
    await assert_continues(fake_provider, run, project=project, rojo=rojo, user=users["editor"])


@pytest.mark.parametrize("fault", ["cut", "silent"])
@pytest.mark.parametrize("answer", ["text", "call"])
async def test_a_connection_lost_after_the_finish_reason_loses_nothing(
    fake_provider, project, users, settings, fault, answer
):
    """The response whole, its finish reason sent, then the connection is reset (a proxy)
    or goes silent past ROJO_PROVIDER_TIMEOUT before the usage chunk and [DONE]: the
    response counts as finished (its usage estimated) and its calls run, and the user is
    told in a notice after it. Before, the turn failed with the text kept and the calls
    dropped."""
    settings.ROJO_PROVIDER_TIMEOUT = 1
    never = threading.Event()
    ending = {"cut": {"cut": True}, "silent": {}}[fault]
    after = [] if fault == "cut" else [Gate(never, timeout=30)]
    if answer == "text":
        fake_provider.add(stream(text_chunks("Whole answer."), *after, **ending))
    else:
        listing = tool_call_chunks([("list_files", {"path": ""})])
        fake_provider.add(stream(listing, *after, **ending), stream(text_chunks("Listed.")))
    rojo = await rojo_for(fake_provider, stream_usage_refused=True)

    run = await run_turn(project=project, rojo=rojo, user=users["editor"])
    never.set()

    assert run.error is None, run.error
    assert run.kinds.count("notice") == 1
    history = await valid_history(run.conversation)
    if answer == "text":
        assert [(m.role, m.content) for m in history] == [
            ("user", "Please help."),
            ("assistant", "Whole answer."),
        ]
    else:
        assert [m.role for m in history] == ["user", "assistant", "tool", "assistant"]
        assert history[2].content == "[]" and history[-1].content == "Listed."
    reported = [r.reported async for r in UsageRecord.objects.filter(message=history[1])]
    assert reported == [False]


async def test_stream_cut_mid_tool_call_writes_nothing(fake_provider, project, users):
    """The connection breaks inside the call's arguments: the file is never written."""
    call = tool_call_chunks(NOTE, text_before="Writing the note.", finish=None)
    fake_provider.add(stream(call[:-2], cut=True))
    rojo = await rojo_for(fake_provider)

    run = await run_turn(project=project, rojo=rojo, user=users["editor"])

    assert_failed(run, "broke mid-response", fake_provider.base_url)
    history = await valid_history(run.conversation)
    assert [(m.role, m.content) for m in history] == [
        ("user", "Please help."),
        ("assistant", "Writing the note."),
    ]
    await assert_continues(fake_provider, run, project=project, rojo=rojo, user=users["editor"])


# Mistral's 422 echoes the refused input, which can be the whole conversation.
MISTRAL_EXTRA_FIELD = {
    "type": "extra_forbidden",
    "loc": ["body", "messages", 1, "assistant", "reasoning_content"],
    "msg": "Extra inputs are not permitted",
    "input": "x" * 5000,
}


@pytest.mark.parametrize(
    ("status", "body", "expected"),
    [
        (401, {"error": {"message": "Invalid token."}}, ["API key", "Invalid token."]),
        (404, {"error": {"message": "model 'nope' not found"}}, ["not found", "model 'nope'"]),
        (429, {"error": {"message": "Quota exceeded."}}, ["rate-limiting", "Quota exceeded."]),
        (500, {"error": {"message": "Boom."}}, ["The provider failed.", "Boom."]),
        (400, [{"error": {"code": 400, "message": "Unknown name 'x'."}}], ["Unknown name 'x'."]),
        (502, "Bad gateway from nginx", ["Bad gateway from nginx"]),
        (
            504,
            "<!DOCTYPE html><html><body><h1>Gateway Timeout</h1><p>Upstream gave up &amp; left."
            "</p><script>track()</script></body></html>",
            ["answered 504: Gateway Timeout Upstream gave up & left."],
        ),
        (
            422,
            {
                "object": "error",
                "message": {"detail": [MISTRAL_EXTRA_FIELD]},
                "type": "invalid_request_message_error",
            },
            ["messages.1.assistant.reasoning_content: Extra inputs are not permitted"],
        ),
        (
            400,
            {
                "error": {
                    "message": "Provider returned error",
                    "metadata": {
                        "raw": '{"error": {"message": "tools.0.input_schema is invalid"}}',
                        "provider_name": "Anthropic",
                    },
                }
            },
            ["Provider returned error (tools.0.input_schema is invalid)"],
        ),
    ],
    ids=[
        "401",
        "404",
        "429",
        "500",
        "400-gemini-array",
        "502-text",
        "504-html-page",
        "422-mistral",
        "openrouter",
    ],
)
async def test_http_error_names_the_status_and_the_providers_message(
    fake_provider, project, users, status, body, expected
):
    """One request (no retries here), nothing stored but the user's message."""
    fake_provider.add(http_error(status, body))
    rojo = await rojo_for(fake_provider)

    run = await run_turn(project=project, rojo=rojo, user=users["editor"])

    message = assert_failed(run, f"answered {status}", *expected)
    assert len(message) < 800  # the provider's part is cut at 500 characters
    assert run.events == [] and len(fake_provider.requests) == 1
    history = await valid_history(run.conversation)
    assert [m.role for m in history] == ["user"]
    messages = await assert_continues(
        fake_provider, run, project=project, rojo=rojo, user=users["editor"]
    )
    # The unanswered message and the next go as one, so that roles alternate.
    assert messages == [{"role": "user", "content": "Please help.\n\nTry again"}]


async def test_http_error_that_echoes_the_api_key_is_scrubbed(fake_provider, project, users):
    """OpenAI's 401 repeats the key it got; the user sees the message without it."""
    body = {"error": {"message": f"Incorrect API key provided: {API_KEY}. Check it."}}
    fake_provider.add(http_error(401, body))
    rojo = await rojo_for(fake_provider)

    run = await run_turn(project=project, rojo=rojo, user=users["editor"])

    assert_failed(run, "answered 401", "Incorrect API key provided: ***. Check it.")
    assert fake_provider.headers[0]["authorization"] == f"Bearer {API_KEY}"
    await valid_history(run.conversation)


async def test_rate_limit_then_success_is_retried_by_the_sdk(
    fake_provider, project, users, settings
):
    """With one retry allowed, a 429 is answered by sending the same request again."""
    settings.ROJO_PROVIDER_RETRIES = 1
    fake_provider.add(
        http_error(429, headers={"retry-after": "0", "retry-after-ms": "10"}),
        stream(text_chunks("Made it.")),
    )
    rojo = await rojo_for(fake_provider)

    run = await run_turn(project=project, rojo=rojo, user=users["editor"])

    assert run.error is None and run.text == "Made it."
    first, second = fake_provider.requests
    assert first == second
    history = await valid_history(run.conversation)
    assert [m.role for m in history] == ["user", "assistant"]


async def test_connection_refused_says_where_it_tried(fake_provider, project, users):
    """Nothing listens on the port: the message names the base URL and the setting to check."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_url = f"http://127.0.0.1:{probe.getsockname()[1]}/v1"
    rojo = await rojo_for(fake_provider, base_url=closed_url)

    run = await run_turn(project=project, rojo=rojo, user=users["editor"])

    assert_failed(run, "Could not connect", closed_url, "base URL")
    assert fake_provider.requests == []
    history = await valid_history(run.conversation)
    assert [m.role for m in history] == ["user"]
    rojo.base_url = fake_provider.base_url
    await rojo.asave(update_fields=["base_url"])
    await assert_continues(fake_provider, run, project=project, rojo=rojo, user=users["editor"])


async def test_slow_first_byte_times_out(fake_provider, project, users, settings):
    """No headers within ROJO_PROVIDER_HEADERS_TIMEOUT: the turn ends instead of hanging."""
    settings.ROJO_PROVIDER_HEADERS_TIMEOUT = 0.3
    fake_provider.add(stream(text_chunks("Too late."), first_byte_delay=1.5))
    rojo = await rojo_for(fake_provider)

    run = await run_turn(project=project, rojo=rojo, user=users["editor"])

    assert_failed(
        run, "did not answer in time", "ROJO_PROVIDER_HEADERS_TIMEOUT", fake_provider.base_url
    )
    assert run.events == []
    history = await valid_history(run.conversation)
    assert [m.role for m in history] == ["user"]


async def test_a_provider_that_never_sends_headers_fails_within_the_total_across_retries(
    fake_provider, project, users, settings
):
    """Each try waits for headers up to ROJO_PROVIDER_HEADERS_TIMEOUT, but all tries together
    stop at ROJO_PROVIDER_TOTAL_TIMEOUT, not the tries times that timeout."""
    settings.ROJO_PROVIDER_RETRIES = 10  # eleven tries of 0.4 s: far past the total
    settings.ROJO_PROVIDER_HEADERS_TIMEOUT = 0.4
    settings.ROJO_PROVIDER_TOTAL_TIMEOUT = 1.2
    for _ in range(11):
        fake_provider.add(stream(text_chunks("Never."), first_byte_delay=4))
    fake_provider.allow_leftovers()  # how many tries fit in the total depends on the backoff
    rojo = await rojo_for(fake_provider)

    run = await run_turn(project=project, rojo=rojo, user=users["editor"])

    assert_failed(run, "did not start answering within 1.2 seconds", "ROJO_PROVIDER_TOTAL_TIMEOUT")
    # The first try timed out on its own limit; the total ended the tries, not their number.
    assert 2 <= len(fake_provider.requests) < 11
    history = await valid_history(run.conversation)
    assert [m.role for m in history] == ["user"]


async def test_the_headers_wait_and_the_stream_silence_have_limits_of_their_own(
    fake_provider, project, users, settings
):
    """Headers slower than the stream's silence limit, and silences in the stream longer
    than the headers limit, are both within their own limits: the reply arrives whole."""
    settings.ROJO_PROVIDER_HEADERS_TIMEOUT = 2
    settings.ROJO_PROVIDER_TIMEOUT = 0.9
    chunks = text_chunks("Slow to start, slow to go", pieces=3)
    fake_provider.add(stream(chunks, first_byte_delay=1.2, delay=0.6))
    rojo = await rojo_for(fake_provider)

    run = await run_turn(project=project, rojo=rojo, user=users["editor"])

    assert run.error is None and run.text == "Slow to start, slow to go"


async def test_a_silence_before_the_first_chunk_has_the_streams_limit_not_the_headers(
    fake_provider, project, users, settings
):
    """Headers at once, then a long prompt read before the first token (llama.cpp does
    this): the silence after the headers is the stream's, not the headers' limit."""
    settings.ROJO_PROVIDER_HEADERS_TIMEOUT = 0.5
    settings.ROJO_PROVIDER_TIMEOUT = 3
    fake_provider.add(stream([Pause(1.5), *text_chunks("Read it all.", pieces=2)]))
    rojo = await rojo_for(fake_provider)

    run = await run_turn(project=project, rojo=rojo, user=users["editor"])

    assert run.error is None and run.text == "Read it all."


async def test_provider_silent_mid_stream_times_out_and_keeps_the_text(
    fake_provider, project, users, settings
):
    """The stream stops sending after some text for longer than ROJO_PROVIDER_TIMEOUT."""
    settings.ROJO_PROVIDER_TIMEOUT = 0.4
    chunks = text_chunks("Started, then nothing", finish=None)
    # Were the silence not timed out, the rest would come and the reply end whole.
    fake_provider.add(stream(chunks, Pause(30.0), text_chunks(" more.")))
    rojo = await rojo_for(fake_provider)

    run = await run_turn(project=project, rojo=rojo, user=users["editor"])

    assert_failed(run, "stopped sending", "ROJO_PROVIDER_TIMEOUT", fake_provider.base_url)
    history = await valid_history(run.conversation)
    assert [(m.role, m.content) for m in history] == [
        ("user", "Please help."),
        ("assistant", "Started, then nothing"),
    ]
    await assert_continues(fake_provider, run, project=project, rojo=rojo, user=users["editor"])


async def test_provider_slower_than_the_timeout_between_chunks_but_sending_is_not_cut(
    fake_provider, project, users, settings
):
    """Gaps shorter than the timeout, adding up to more than it, are not a stall."""
    settings.ROJO_PROVIDER_TIMEOUT = 0.4
    fake_provider.add(stream(text_chunks("One two three four five six", pieces=6), delay=0.15))
    rojo = await rojo_for(fake_provider)

    run = await run_turn(project=project, rojo=rojo, user=users["editor"])

    assert run.error is None and run.text == "One two three four five six"


async def test_a_reader_slower_than_the_timeout_is_not_a_stalled_provider(fake_provider, settings):
    """Bytes received but not read yet are the reader's delay, not the provider's silence."""
    from rojos.provider.accumulator import StreamAccumulator
    from rojos.provider.clients import rojo_client
    from rojos.provider.stream import provider_chunks
    from tests.support.helpers import make_rojo

    settings.ROJO_PROVIDER_TIMEOUT = 0.3
    fake_provider.add(stream(text_chunks("Slowly read, all of it.", pieces=5), delay=0.05))
    rojo = await sync_to_async(make_rojo)(fake_provider.base_url)
    client = await rojo_client(rojo)
    accumulator = StreamAccumulator()
    request = {"model": rojo.model, "messages": [{"role": "user", "content": "Hi"}], "stream": True}

    async for batch in provider_chunks(client, request):
        for chunk in batch:
            accumulator.feed(chunk)
        await asyncio.sleep(0.6)

    assert accumulator.result().text == "Slowly read, all of it."


@pytest.mark.parametrize(
    "bad_line",
    ['data: {"choices": [{"delta": {"content": "x"\n\n', "data: [1, 2\n\n"],
    ids=["truncated-object", "truncated-array"],
)
async def test_chunk_that_is_not_json_fails_and_keeps_the_text(
    fake_provider, project, users, bad_line
):
    """A malformed data line ends the turn; the text before it stays."""
    fake_provider.add(stream(text_chunks("Partial answer", finish=None), bad_line))
    rojo = await rojo_for(fake_provider)

    run = await run_turn(project=project, rojo=rojo, user=users["editor"])

    assert_failed(run, "not valid JSON")
    history = await valid_history(run.conversation)
    assert [(m.role, m.content) for m in history] == [
        ("user", "Please help."),
        ("assistant", "Partial answer"),
    ]
    await assert_continues(fake_provider, run, project=project, rojo=rojo, user=users["editor"])


@pytest.mark.parametrize(
    "call",
    [
        {"index": 0, "id": "call_1", "function": {"name": 5, "arguments": "{}"}},
        {"index": 0, "id": "call_1", "function": {"name": ["list_files"], "arguments": "{}"}},
        {"index": 0, "id": 7, "function": {"name": "list_files", "arguments": "{}"}},
    ],
    ids=["name-number", "name-list", "id-number"],
)
async def test_a_call_whose_name_or_id_is_not_a_string_fails_and_is_never_stored(
    fake_provider, project, users, call
):
    """A tool call delta with a number or a list for its name or id is a malformed chunk:
    the turn fails with the text before it kept, the call neither runs nor is stored (stored,
    it would fail every later request of the conversation), and the next message works."""
    calls = {"choices": [{"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": None}]}
    finish = {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}
    fake_provider.add(stream(text_chunks("Looking.", finish=None), calls, finish))
    rojo = await rojo_for(fake_provider)

    run = await run_turn(project=project, rojo=rojo, user=users["editor"])

    assert_failed(run, "malformed stream chunk")
    history = await valid_history(run.conversation)
    assert [(m.role, m.content, m.tool_calls) for m in history] == [
        ("user", "Please help.", None),
        ("assistant", "Looking.", None),
    ]
    await assert_continues(fake_provider, run, project=project, rojo=rojo, user=users["editor"])


async def test_llama_cpp_error_line_fails_with_its_message(fake_provider, project, users):
    """Older llama.cpp writes a non-standard `error:` line instead of a data chunk."""
    line = "error: " + json.dumps({"message": "context overflow"}) + "\n\n"
    fake_provider.add(stream(text_chunks("Start", finish=None), line))
    rojo = await rojo_for(fake_provider)

    run = await run_turn(project=project, rojo=rojo, user=users["editor"])

    assert_failed(run, "context overflow")
    history = await valid_history(run.conversation)
    assert history[-1].content == "Start"


async def test_a_llama_cpp_error_line_saying_the_prompt_is_too_long_is_recovered_from(
    fake_provider, project, users
):
    """Older llama.cpp, streaming, answers 200 and then refuses a prompt over its context in
    an `error:` line: that is the same overflow as its 400 or 500, so the turn learns a
    smaller window and sends the request again compacted (the oldest turn summarised),
    instead of failing on the server's raw JSON, and every later turn with it."""
    long = "A long brief of the work to come, line after line.\n" * 150  # ~1,950 tokens
    fake_provider.window = Window(tokens=5_000, shape="llamacpp_line")
    fake_provider.responder = lambda body: stream(text_chunks("Ok."))
    rojo = await rojo_for(fake_provider)  # the 32,768 tokens of a window nobody declared
    first = await run_turn(project=project, rojo=rojo, user=users["editor"], message=long)
    assert fake_provider.overflowed == []

    second = await run_turn(
        project=project, rojo=rojo, user=users["editor"], message=long + "Go on.",
        conversation=first.conversation,
    )  # fmt: skip

    assert (second.error, second.text) == (None, "Ok.")
    assert fake_provider.overflowed == [1]
    assert prompt_tokens(fake_provider.requests[-1]) <= 5_000
    assert (await Rojo.objects.aget(pk=rojo.pk)).refused_window < 32_768


async def test_a_summary_refused_as_too_long_teaches_the_window_for_the_next_turn(
    fake_provider, project, users
):
    """The server's context shrank under a long conversation (llama-server restarted with a
    smaller -c) and it states no window: the turn's request is refused, the window guessed
    from it is still too large, and so is the summary made to fit it. That refusal teaches
    the window too, so the turn ends saying to send the message again, and the next turn
    fits; before, each later turn sent the same summary request and was refused again."""
    long = "A long brief of the work to come, line after line.\n" * 600  # ~7,800 tokens
    fake_provider.responder = lambda body: stream(text_chunks("Ok."))
    rojo = await rojo_for(fake_provider, tools=[])
    first = await run_turn(project=project, rojo=rojo, user=users["editor"], message=long)
    fake_provider.window = Window(tokens=2_500, shape="llamacpp_line")

    turns = []
    for _ in range(2):
        stored = await Rojo.objects.aget(pk=rojo.pk)
        run = await run_turn(
            project=project, rojo=stored, user=users["editor"], message="Go on.",
            conversation=first.conversation,
        )  # fmt: skip
        turns.append(run)

    refused, next_turn = turns
    assert refused.error is not None and refused.error.code == "context_overflow"
    assert "Send your message again" in str(refused.error)
    assert (next_turn.error, next_turn.text) == (None, "Ok.")
    assert prompt_tokens(fake_provider.requests[-1]) <= 2_500
