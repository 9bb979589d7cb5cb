"""The fake provider over real HTTP: the SDK and a raw client get exactly what a test scripted."""

import json
import threading
import time

import httpx2
import openai
import pytest

from tests.support.fake_provider import (
    NO_REPLY_MESSAGE,
    http_error,
    json_reply,
    stream,
    text_chunks,
    tool_call_chunks,
    usage_chunk,
)
from tests.support.live_server import wait_until

BODY = {"model": "fake-model", "messages": [{"role": "user", "content": "hi"}], "stream": True}
CALLS = [("read_file", {"path": "notes/today.md"}), ("list_dir", {})]


def sse_lines(fake_provider, *chunks, **options) -> list[str]:
    """Script one stream, fetch it with a raw HTTP client, return its non-blank lines."""
    fake_provider.add(stream(*chunks, **options))
    with httpx2.stream("POST", f"{fake_provider.base_url}/chat/completions", json=BODY) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        assert response.headers["transfer-encoding"] == "chunked"
        return [line for line in response.iter_lines() if line]


def tool_deltas(fake_provider, calls=CALLS, **options) -> list[dict]:
    """The tool-call items, one per delta, of a scripted tool-call stream."""
    lines = sse_lines(fake_provider, tool_call_chunks(calls, **options))
    assert lines[-1] == "data: [DONE]"
    deltas = [json.loads(line.removeprefix("data: "))["choices"][0]["delta"] for line in lines[:-1]]
    return [delta["tool_calls"][0] for delta in deltas if "tool_calls" in delta]


def sdk(fake_provider) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=fake_provider.base_url, api_key="k", max_retries=0)


async def sdk_stream(fake_provider, received: list) -> None:
    """Stream one completion through the SDK, appending chunks to `received` as they arrive."""
    async with sdk(fake_provider) as client:
        response = await client.chat.completions.create(
            model="fake-model", messages=[{"role": "user", "content": "hi"}], stream=True
        )
        async for item in response:
            received.append(item)


async def test_sdk_receives_text_chunks_in_order_then_usage(fake_provider):
    fake_provider.add(stream(text_chunks("Hello, world", pieces=3), usage_chunk(3, 4)))
    received = []
    await sdk_stream(fake_provider, received)
    choices = [item.choices[0] for item in received if item.choices]
    assert [choice.delta.content for choice in choices] == ["Hell", "o, w", "orld", None]
    assert choices[0].delta.role == "assistant"
    assert [choice.finish_reason for choice in choices] == [None, None, None, "stop"]
    assert received[-1].choices == [] and received[-1].usage.total_tokens == 7


async def test_sdk_assembles_fragmented_tool_call_after_text(fake_provider):
    fake_provider.add(stream(tool_call_chunks(CALLS[:1], text_before="Let me look.")))
    received = []
    await sdk_stream(fake_provider, received)
    deltas = [item.choices[0].delta for item in received]
    assert "".join(delta.content or "" for delta in deltas) == "Let me look."
    fragments = [call.function.arguments for d in deltas for call in d.tool_calls or []]
    assert len(fragments) > 2 and json.loads("".join(fragments)) == {"path": "notes/today.md"}
    assert received[-1].choices[0].finish_reason == "tool_calls"


async def test_requests_and_headers_are_recorded_and_json_reply_served(fake_provider):
    message = {"role": "assistant", "content": "plain"}
    choice = {"index": 0, "message": message, "finish_reason": "stop"}
    fake_provider.add(json_reply({"id": "x", "object": "chat.completion", "choices": [choice]}))
    async with sdk(fake_provider) as client:
        completion = await client.chat.completions.create(model="m", messages=[message])
        models = await client.models.list()
    assert completion.choices[0].message.content == "plain"
    assert fake_provider.requests == [{"model": "m", "messages": [message]}]
    assert fake_provider.headers[0]["authorization"] == "Bearer k"
    assert [model.id for model in models.data] == ["fake-model"]


def test_raw_lines_pass_verbatim_and_stream_ends_with_done(fake_provider):
    lines = sse_lines(fake_provider, ": keepalive\n\n", text_chunks("x"), 'error: {"e": 1}\n\n')
    assert lines[0] == ": keepalive" and lines[-2:] == ['error: {"e": 1}', "data: [DONE]"]
    assert len(sse_lines(fake_provider, text_chunks("x"), done=False)) == 2


def test_delay_paces_chunks_and_first_byte_delay_holds_headers(fake_provider, monkeypatch):
    """The provider pauses first_byte_delay before its headers and `delay` before each chunk
    (what it did, in order, on its side of the connection)."""
    import tests.support.fake_provider as module

    done: list[tuple] = []

    class Time:
        @staticmethod
        def sleep(seconds: float) -> None:
            if seconds:
                done.append(("pause", seconds))
            time.sleep(seconds)

    handler = module._Handler
    send_response, write_chunk = handler.send_response, handler._write_chunk
    monkeypatch.setattr(module, "time", Time)
    monkeypatch.setattr(
        handler,
        "send_response",
        lambda self, *a: (done.append(("headers",)), send_response(self, *a)),
    )
    monkeypatch.setattr(
        handler,
        "_write_chunk",
        lambda self, text: (done.append(("chunk",)), write_chunk(self, text)),
    )
    fake_provider.add(stream(text_chunks("abc", pieces=3), delay=0.05, first_byte_delay=0.15))
    with httpx2.stream("POST", f"{fake_provider.base_url}/chat/completions", json=BODY) as response:
        data = [line for line in response.iter_lines() if line.startswith("data")]

    assert len(data) == 5  # three pieces, the finish, [DONE]
    paced = [("pause", 0.05), ("chunk",)] * 4
    assert done == [("pause", 0.15), ("headers",), *paced, ("chunk",)]


def test_replies_sharing_a_barrier_start_once_all_were_requested(fake_provider):
    together = threading.Barrier(2)
    fake_provider.add(*(stream(text_chunks(n), together=together) for n in ("one", "two")))
    replies: dict[str, float] = {}

    def fetch(name: str) -> None:
        url = f"{fake_provider.base_url}/chat/completions"
        with httpx2.stream("POST", url, json=BODY) as response:
            replies[name] = time.monotonic()
            response.read()

    first = threading.Thread(target=fetch, args=("first",))
    first.start()
    wait_until(lambda: len(fake_provider.requests) == 1)
    time.sleep(0.2)  # time for the first reply to start, if it did not wait
    second_requested = time.monotonic()
    fetch("second")
    first.join(timeout=10)

    assert replies["first"] >= second_requested and set(replies) == {"first", "second"}


@pytest.mark.parametrize("ids", ["first", "every", "none"])
def test_ids_modes(fake_provider, ids):
    deltas = tool_deltas(fake_provider, ids=ids)
    firsts = [delta for delta in deltas if "type" in delta]
    with_id = [delta for delta in deltas if "id" in delta]
    assert with_id == {"first": firsts, "every": deltas, "none": []}[ids]
    assert all(delta["id"] == firsts[delta["index"]]["id"] for delta in with_id)
    assert all(d["id"].startswith("call_") and len(d["id"]) != 9 for d in with_id)
    assert len({delta["id"] for delta in with_id}) == (0 if ids == "none" else 2)


@pytest.mark.parametrize(
    ("index", "expected"), [("normal", {0, 1}), ("zero", {0}), ("missing", {None})]
)
def test_index_modes(fake_provider, index, expected):
    deltas = tool_deltas(fake_provider, index=index)
    assert {delta.get("index") for delta in deltas} == expected


def test_fragments_split_arguments_and_name_only_first(fake_provider):
    deltas = tool_deltas(fake_provider, CALLS[:1], empty_name_on_continuation=True)
    assert deltas[0]["function"] == {"name": "read_file", "arguments": ""}
    assert all(delta["function"]["name"] == "" for delta in deltas[1:])
    assert "".join(d["function"]["arguments"] for d in deltas) == json.dumps(CALLS[0][1])
    assert [len(d["function"]["arguments"]) for d in deltas] == [0, 5, 5, 5, 5, 5, 1]


def test_whole_and_trailing_empty_arguments(fake_provider):
    whole = tool_deltas(fake_provider, arguments="whole")
    assert [d["function"] for d in whole] == [
        {"name": "read_file", "arguments": '{"path": "notes/today.md"}'},
        {"name": "list_dir", "arguments": "{}"},
    ]
    trailing = tool_deltas(
        fake_provider, [("a", "{bad json"), ("b", None)], arguments="trailing_empty"
    )
    assert [d["function"] for d in trailing] == [
        {"name": "a", "arguments": "{bad json"},
        {"arguments": ""},
        {"name": "b"},
        {"arguments": ""},
    ]


def test_extra_and_finish_placement(fake_provider):
    extra = {"extra_content": {"google": {"thought_signature": "sig"}}}
    whole = tool_call_chunks(
        CALLS, arguments="whole", extra=extra, finish="stop", finish_in_last=True
    )
    assert [item["choices"][0]["finish_reason"] for item in whole] == [None, "stop"]
    unfinished = tool_call_chunks(CALLS, finish=None)
    assert all(item["choices"][0]["finish_reason"] is None for item in unfinished)
    deltas = tool_deltas(fake_provider, extra=extra)
    signatures = [delta["extra_content"] for delta in deltas if "type" in delta]
    assert signatures == [extra["extra_content"]] * 2
    assert deltas[1] == {"index": 0, "function": {"arguments": '{"pat'}}


@pytest.mark.parametrize("body", [[{"error": {"code": 400, "message": "bad"}}], "<html>"])
def test_http_error_body_and_headers_reach_raw_client(fake_provider, body):
    fake_provider.add(http_error(400, body, {"X-A": "1"}))
    response = httpx2.post(f"{fake_provider.base_url}/chat/completions", json=BODY)
    assert (response.status_code, response.headers["x-a"]) == (400, "1")
    assert (response.text if isinstance(body, str) else response.json()) == body


async def test_http_error_raises_api_status_error_in_sdk(fake_provider):
    fake_provider.add(http_error(429))
    with pytest.raises(openai.APIStatusError) as caught:
        await sdk_stream(fake_provider, [])
    assert caught.value.status_code == 429
    assert caught.value.body["message"] == "fake provider error (HTTP 429)"


async def test_cut_is_a_client_side_error_after_the_chunks(fake_provider):
    fake_provider.add(stream(text_chunks("partial", pieces=2, finish=None), cut=True))
    received = []
    with pytest.raises(openai.APIConnectionError):
        await sdk_stream(fake_provider, received)
    assert "".join(item.choices[0].delta.content for item in received) == "partial"
    with pytest.raises(httpx2.RemoteProtocolError):
        sse_lines(fake_provider, text_chunks("x"), cut=True)


def test_unscripted_request_gets_500_and_unknown_path_404(fake_provider):
    response = httpx2.post(f"{fake_provider.base_url}/chat/completions", json=BODY)
    assert response.status_code == 500
    assert response.json()["error"]["message"] == NO_REPLY_MESSAGE
    assert httpx2.get(f"{fake_provider.base_url}/nope").status_code == 404
    assert len(fake_provider.requests) == 1


def test_client_hanging_up_mid_stream_does_not_block_the_server(fake_provider):
    fake_provider.add(stream(text_chunks("x" * 40, pieces=40), delay=0.01))
    with httpx2.stream("POST", f"{fake_provider.base_url}/chat/completions", json=BODY) as response:
        next(response.iter_lines())
    assert httpx2.get(f"{fake_provider.base_url}/models", timeout=1).status_code == 200


def test_leftover_replies_fail_unless_allowed(fake_provider):
    fake_provider.add(http_error(500))
    with pytest.raises(AssertionError, match=r"never requested: http_error\(500\)"):
        fake_provider.check_consumed()
    fake_provider.allow_leftovers()
    fake_provider.check_consumed()
