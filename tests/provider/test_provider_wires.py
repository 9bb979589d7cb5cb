"""Whole turns through the chat endpoint, each over one real provider's stream as it is sent.

Each case writes the provider's bytes as PROVIDERS.md reports them (its ids, its chunking, where
it puts the finish reason, usage and thinking, its SSE framing) and checks the three things a
user and the next request depend on: the events the page receives, the messages stored, and
what goes back to the provider in the request after the calls.
"""

import json

import pytest

from roject import storage
from rojos.provider.request import wire_call_id
from tests.support.fake_provider import HttpError, http_error, prompt_tokens, stream, text_chunks
from tests.support.helpers import assert_history_valid, make_rojo, stored_history

pytestmark = pytest.mark.django_db(transaction=True)

CREATED = 1_750_000_000


@pytest.fixture
def rojo(fake_provider, settings):
    settings.ROJO_PROVIDER_RETRIES = 0
    return make_rojo(fake_provider.base_url)


def data(chunk: dict, end: str = "\n") -> str:
    """One SSE data line and the blank line after it, with `end` as the line ending."""
    return f"data: {json.dumps(chunk)}{end}{end}"


def envelope(model: str, choices: list[dict], **extra) -> dict:
    return {
        "id": "chatcmpl-wire",
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": model,
        "choices": choices,
        **extra,
    }


def delta(model: str, delta_: dict, finish: str | None = None, **extra) -> dict:
    """A chunk with one choice, as every provider sends it."""
    return envelope(model, [{"index": 0, "delta": delta_, "finish_reason": finish}], **extra)


def usage_only(model: str, prompt: int, completion: int) -> dict:
    usage = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    return envelope(model, [], usage=usage)


def seen(events) -> list[tuple]:
    """What the page shows of a turn: text and thinking joined per run, each call with its
    arguments and each result, in order (forming calls' deltas left out)."""
    lines: list[tuple] = []
    for event in events:
        if event.type in ("CHAT", "REASONING"):
            if lines and lines[-1][0] == event.type:
                lines[-1] = (event.type, lines[-1][1] + event.data["text"])
            else:
                lines.append((event.type, event.data["text"]))
        elif event.type == "TOOL_CALL":
            lines.append(("TOOL_CALL", event.data["name"], event.data["args"]))
        elif event.type == "TOOL_RESULT":
            lines.append(("TOOL_RESULT", event.data["name"], event.data["ok"]))
        elif event.type in ("START", "ERROR", "DONE"):
            lines.append((event.type,))
    return lines


def chat(client_for, users, project, rojo, message: str = "Make alpha and beta."):
    """One turn over the chat endpoint: its events, its conversation's stored messages."""
    events = client_for(users["editor"]).chat(project.pk, rojo=rojo.slug, message=message)
    conversation = events[0].data["conversation"]
    history = stored_history(conversation)
    assert_history_valid(history)
    return events, history


def sent_back(history, request: dict) -> None:
    """The request after the calls carries the stored calls under their wire ids, each
    result under its call's id, and every call's arguments as a JSON object string."""
    calls = history[1].tool_calls
    assistant = request["messages"][1]
    assert assistant["role"] == "assistant"
    assert "content" not in assistant or assistant["content"]  # never null or ""
    wire = assistant["tool_calls"]
    assert [c["id"] for c in wire] == [wire_call_id(c["id"]) for c in calls]
    assert [c["function"]["name"] for c in wire] == [c["function"]["name"] for c in calls]
    assert all(isinstance(json.loads(c["function"]["arguments"]), dict) for c in wire)
    results = request["messages"][2 : 2 + len(calls)]
    assert [m["role"] for m in results] == ["tool"] * len(calls)
    assert [m["tool_call_id"] for m in results] == [c["id"] for c in wire]
    assert all(m["content"] is not None for m in request["messages"] if "content" in m)


def made(project, *paths: str) -> bool:
    """Whether each folder is in the project's files."""
    return all((storage.project_root(project.pk) / path).is_dir() for path in paths)


TWO_DIRECTORIES = [
    ("START",),
    ("TOOL_CALL", "create_directory", {"path": "alpha"}),
    ("TOOL_RESULT", "create_directory", True),
    ("TOOL_CALL", "create_directory", {"path": "beta"}),
    ("TOOL_RESULT", "create_directory", True),
    ("CHAT", "Both are there."),
    ("DONE",),
]


@pytest.mark.parametrize("ids", ["function-call", "empty"])
def test_gemini_text_then_whole_parallel_calls_without_index_finished_as_stop(
    client_for, users, project, rojo, fake_provider, ids
):
    """Gemini: text, then each parallel call whole in a chunk of its own with no `index` (and
    an id, or "" for one), the thought signature on the first call only, `"stop"` and the
    usage in the last call's chunk. Both calls run; the text shows before them; the next
    request sends the signature back on the first call and on no other."""
    model = "gemini-3-flash-preview"
    signature = {"google": {"thought_signature": "CpcCAdHtim9/kQ1jYzsV1K0cRZ4+Xq=="}}
    call_ids = (
        ["function-call-5732391946853510171", "function-call-5732391946853510172"]
        if ids == "function-call"
        else ["", ""]
    )

    def call(n: int, path: str) -> dict:
        item = {
            "function": {"arguments": json.dumps({"path": path}), "name": "create_directory"},
            "id": call_ids[n],
            "type": "function",
        }
        return {"extra_content": signature, **item} if n == 0 else item

    usage = {"completion_tokens": 31, "prompt_tokens": 402, "total_tokens": 433}
    last = delta(model, {"role": "assistant", "tool_calls": [call(1, "beta")]}, "stop", usage=usage)
    fake_provider.add(
        stream(
            data(delta(model, {"content": "I'll make both folders.", "role": "assistant"})),
            data(delta(model, {"role": "assistant", "tool_calls": [call(0, "alpha")]})),
            data(last),
        ),
        stream(text_chunks("Both are there.")),
    )
    rojo.model = model
    rojo.save(update_fields=["model"])

    events, history = chat(client_for, users, project, rojo)

    assert made(project, "alpha", "beta")
    assert seen(events) == [TWO_DIRECTORIES[0], ("CHAT", "I'll make both folders."),
                            *TWO_DIRECTORIES[1:]]  # fmt: skip
    calls = [e.data for e in events if e.type == "TOOL_CALL"]
    assert [(c["index"], c["of"]) for c in calls] == [(0, 2), (1, 2)]
    assert [m.role for m in history] == ["user", "assistant", "tool", "tool", "assistant"]
    assert history[1].content == "I'll make both folders."
    assert history[1].usage == usage
    stored = history[1].tool_calls
    assert [c.get("extra_content") for c in stored] == [signature, None]
    if ids == "function-call":
        assert [c["id"] for c in stored] == call_ids
    request = fake_provider.requests[1]
    sent_back(history, request)
    assistant = request["messages"][1]
    assert assistant["content"] == "I'll make both folders."
    assert [c.get("extra_content") for c in assistant["tool_calls"]] == [signature, None]


def test_ollama_thinking_then_every_call_at_index_0_then_a_usage_only_chunk(
    client_for, users, project, rojo, fake_provider
):
    """Ollama: thinking in a `reasoning` field, `"content": ""` on every chunk, each call
    whole at index 0 with its own id, the finish reason in a chunk of its own, then usage in
    a chunk with `choices: []`. The thinking shows before the calls, and goes back with them
    within the tool loop (gpt-oss needs it)."""
    model = "gpt-oss:20b"
    ollama = {"system_fingerprint": "fp_ollama"}

    def call(call_id: str, path: str) -> dict:
        return {
            "id": call_id,
            "index": 0,
            "type": "function",
            "function": {"name": "create_directory", "arguments": json.dumps({"path": path})},
        }

    head = {"role": "assistant", "content": ""}
    fake_provider.add(
        stream(
            data(delta(model, {**head, "reasoning": "Two folders: "}, **ollama)),
            data(delta(model, {**head, "reasoning": "alpha and beta."}, **ollama)),
            data(delta(model, {**head, "tool_calls": [call("call_m0ehb5tr", "alpha")]}, **ollama)),
            data(delta(model, {**head, "tool_calls": [call("call_4k2v9xqa", "beta")]}, **ollama)),
            data(delta(model, head, "tool_calls", **ollama)),
            data(usage_only(model, 180, 41)),
        ),
        stream(text_chunks("Both are there.")),
    )
    rojo.model = model
    rojo.save(update_fields=["model"])

    events, history = chat(client_for, users, project, rojo)

    assert made(project, "alpha", "beta")
    assert seen(events) == [
        TWO_DIRECTORIES[0], ("REASONING", "Two folders: alpha and beta."), *TWO_DIRECTORIES[1:]
    ]  # fmt: skip
    assert [c["id"] for c in history[1].tool_calls] == ["call_m0ehb5tr", "call_4k2v9xqa"]
    assert history[1].reasoning == "Two folders: alpha and beta."
    assert history[1].usage["prompt_tokens"] == 180
    request = fake_provider.requests[1]
    sent_back(history, request)
    assert request["messages"][1]["reasoning"] == "Two folders: alpha and beta."
    assert "content" not in request["messages"][1]


def test_claude_through_a_gateway_numbers_its_calls_from_1_after_text(
    client_for, users, project, rojo, fake_provider
):
    """Anthropic's compatibility layer (and gateways serving Claude) number calls from their
    content blocks: after a text block the first call is index 1, its arguments streamed in
    fragments after an empty first one."""
    model = "claude-sonnet-4-5"

    def part(index: int, **fields) -> dict:
        return {"tool_calls": [{"index": index, **fields}]}

    first = {"id": "toolu_01A09q90qw90lq917835lq9", "type": "function"}
    second = {"id": "toolu_01B7kYHpVqqS8g3iHtz1PcnM", "type": "function"}
    named = {"name": "create_directory", "arguments": ""}
    fake_provider.add(
        stream(
            data(delta(model, {"role": "assistant", "content": ""})),
            data(delta(model, {"content": "I'll make "})),
            data(delta(model, {"content": "both folders."})),
            data(delta(model, part(1, **first, function=named))),
            data(delta(model, part(1, function={"arguments": '{"pa'}))),
            data(delta(model, part(1, function={"arguments": 'th": "alpha"}'}))),
            data(delta(model, part(2, **second, function=named))),
            data(delta(model, part(2, function={"arguments": '{"path": "beta"}'}))),
            data(delta(model, {}, "tool_calls")),
        ),
        stream(text_chunks("Both are there.")),
    )

    events, history = chat(client_for, users, project, rojo)

    assert made(project, "alpha", "beta")
    assert seen(events) == [TWO_DIRECTORIES[0], ("CHAT", "I'll make both folders."),
                            *TWO_DIRECTORIES[1:]]  # fmt: skip
    assert [c["id"] for c in history[1].tool_calls] == [first["id"], second["id"]]
    sent_back(history, fake_provider.requests[1])


def test_llama_cpp_python_think_split_mid_tag_then_a_repeated_call_over_crlf_with_pings(
    client_for, users, project, rojo, fake_provider
):
    """llama-cpp-python behind sse-starlette: CRLF line endings and `: ping` comments; a
    `<think>` block whose tags a tokenizer cut ("<th" "ink>", "</thi" "nk>"), then a call
    whose full name and id come again on every chunk, `"content": null` beside it; no
    [DONE]. The thinking shows and is stored but never sent back (a template's own); the
    call runs once; the next request has no null content (that server answers it 500)."""
    model = "qwen3-8b-q4_k_m.gguf"
    call_id = "call_8b7e2f5c-4a31-4a9e-9d0f-0c5a8d1e6b2f"

    def repeated(arguments: str) -> dict:
        function = {"name": "create_directory", "arguments": arguments}
        return {"content": None, "tool_calls": [
            {"index": 0, "id": call_id, "type": "function", "function": function}
        ]}  # fmt: skip

    crlf = "\r\n"
    fake_provider.add(
        stream(
            data(delta(model, {"role": "assistant", "content": "<th"}), crlf),
            data(delta(model, {"content": "ink>\nThe user wants "}), crlf),
            ": ping - 2025-06-15 10:04:22.114321+00:00\r\n\r\n",
            data(delta(model, {"content": "one folder.</thi"}), crlf),
            data(delta(model, {"content": "nk>\n\n"}), crlf),
            data(delta(model, repeated('{"path": ')), crlf),
            data(delta(model, repeated('"alpha"}')), crlf),
            data(delta(model, {}, "tool_calls"), crlf),
            done=False,
        ),
        lambda body: (
            http_error(500, "Internal Server Error")
            if any(m.get("content", "") is None for m in body["messages"])
            else stream(text_chunks("It is there."))
        ),
    )
    rojo.model = model
    rojo.save(update_fields=["model"])

    events, history = chat(client_for, users, project, rojo, message="Make alpha.")

    assert made(project, "alpha")
    assert seen(events) == [
        ("START",),
        ("REASONING", "\nThe user wants one folder."),
        ("TOOL_CALL", "create_directory", {"path": "alpha"}),
        ("TOOL_RESULT", "create_directory", True),
        ("CHAT", "It is there."),
        ("DONE",),
    ]
    assert [c["id"] for c in history[1].tool_calls] == [call_id]
    assert history[1].tool_calls[0]["function"]["name"] == "create_directory"
    assert history[1].reasoning == "\nThe user wants one folder."
    request = fake_provider.requests[1]
    sent_back(history, request)
    assert set(request["messages"][1]) == {"role", "tool_calls"}
    assert "The user wants" not in json.dumps(request)


def test_mistral_typed_parts_then_a_call_with_its_finish_reason_and_usage_in_one_chunk(
    client_for, users, project, rojo, fake_provider
):
    """Mistral's reasoning models: content as a list of typed parts (thinking, then text),
    then the call whole with a 9-character id, the finish reason and the usage in the same
    chunk. The thinking never goes back (Mistral answers 422 to it); ids go back as 9
    letters and digits."""
    model = "magistral-medium-latest"
    thinking = {"type": "thinking", "thinking": [{"type": "text", "text": "One folder."}]}
    call = {
        "id": "D681PevKs",
        "function": {"name": "create_directory", "arguments": '{"path": "alpha"}'},
        "index": 0,
    }
    usage = {"prompt_tokens": 512, "total_tokens": 540, "completion_tokens": 28}
    fake_provider.add(
        stream(
            data(delta(model, {"role": "assistant", "content": [thinking]})),
            data(delta(model, {"content": [{"type": "text", "text": "Making it."}]})),
            data(delta(model, {"content": "", "tool_calls": [call]}, "tool_calls", usage=usage)),
        ),
        stream(text_chunks("It is there.")),
    )
    rojo.model = model
    rojo.save(update_fields=["model"])

    events, history = chat(client_for, users, project, rojo, message="Make alpha.")

    assert made(project, "alpha")
    assert seen(events) == [
        ("START",),
        ("REASONING", "One folder."),
        ("CHAT", "Making it."),
        ("TOOL_CALL", "create_directory", {"path": "alpha"}),
        ("TOOL_RESULT", "create_directory", True),
        ("CHAT", "It is there."),
        ("DONE",),
    ]
    assert (history[1].content, history[1].reasoning) == ("Making it.", "One folder.")
    assert history[1].usage == usage
    request = fake_provider.requests[1]
    sent_back(history, request)
    assert set(request["messages"][1]) == {"role", "content", "tool_calls"}
    assert request["messages"][1]["content"] == "Making it."
    assert all(len(c["id"]) == 9 for c in request["messages"][1]["tool_calls"])
    assert "One folder." not in json.dumps(request)


@pytest.mark.parametrize("size", [7, 13])
def test_sse_framing_of_any_server_with_utf8_cut_between_reads(
    client_for, users, project, rojo, fake_provider, size
):
    """What SSE allows and servers send: `event:`, `id:` and `retry:` fields, comments
    (OpenRouter's ": OPENROUTER PROCESSING" keep-alives) between a call's fragments, `data:`
    with no space, lines ending in CR alone; all of it written `size` bytes at a time, so
    that reads cut lines, line endings and multi-byte UTF-8 characters in two. The text and
    the file come out as written; the stream ends after its usage chunk, with no [DONE]."""
    model = "openrouter/auto"
    text = "Grüße — 世界 🌍 ok."
    note = {"path": "notes/gruß.txt", "text": "Ünïcödé ✓ 🚀\n"}
    arguments = json.dumps(note, ensure_ascii=False)
    call = {"index": 0, "id": "gen-call-7f3a", "type": "function",
            "function": {"name": "write_text_content", "arguments": ""}}  # fmt: skip

    def raw(chunk: dict, end: str = "\n") -> str:
        return f"data:{json.dumps(chunk, ensure_ascii=False)}{end}{end}"

    def fragment(piece: str) -> dict:
        return delta(model, {"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})

    body = "".join(
        [
            ": OPENROUTER PROCESSING\n\n",
            "event: message\nid: 1\nretry: 3000\n",
            raw(delta(model, {"role": "assistant", "content": ""})),
            raw(delta(model, {"content": text[:9]}), "\r"),
            raw(delta(model, {"content": text[9:]}), "\r\n"),
            raw(delta(model, {"tool_calls": [call]})),
            raw(fragment(arguments[:20])),
            ": OPENROUTER PROCESSING\n\n",
            raw(fragment(arguments[20:])),
            "event: message\n" + raw(delta(model, {}, "tool_calls")),
            raw(usage_only(model, 90, 12)),
        ]
    ).encode()
    pieces = [body[at : at + size] for at in range(0, len(body), size)]
    assert any(not _decodes(piece) for piece in pieces)  # some cut a character in two
    fake_provider.add(stream(*pieces, done=False), stream(text_chunks("Written.")))

    events, history = chat(client_for, users, project, rojo, message="Write the note.")

    assert seen(events) == [
        ("START",),
        ("CHAT", text),
        ("TOOL_CALL", "write_text_content", note),
        ("TOOL_RESULT", "write_text_content", True),
        ("CHAT", "Written."),
        ("DONE",),
    ]
    assert (storage.project_root(project.pk) / note["path"]).read_text() == note["text"]
    assert history[1].content == text
    assert json.loads(history[1].tool_calls[0]["function"]["arguments"]) == note
    assert history[1].usage["prompt_tokens"] == 90
    sent_back(history, fake_provider.requests[1])
    sent = fake_provider.requests[1]["messages"][1]
    assert json.loads(sent["tool_calls"][0]["function"]["arguments"]) == note


def _decodes(piece: bytes) -> bool:
    try:
        piece.decode()
    except UnicodeDecodeError:
        return False
    return True


VLLM_NO_PARSER = {
    "object": "error",
    "message": '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser '
    "to be set",
    "type": "BadRequestError",
    "param": None,
    "code": 400,
}
LLAMA_CPP_NO_JINJA = {
    "error": {"code": 500, "message": "tools param requires --jinja flag", "type": "server_error"}
}


@pytest.mark.parametrize(
    ("status", "body", "words"),
    [
        (400, VLLM_NO_PARSER, VLLM_NO_PARSER["message"]),
        (500, LLAMA_CPP_NO_JINJA, "tools param requires --jinja flag"),
    ],
    ids=["vllm-without-a-tool-parser", "llama-server-without-jinja"],
)
def test_a_server_not_set_up_for_tools_is_named_in_its_own_words(
    client_for, users, project, rojo, fake_provider, status, body, words
):
    """vLLM started without a tool-call parser, llama-server without --jinja: the user reads
    the server's own message (what to start it with), and nothing but their message is
    stored."""
    fake_provider.add(http_error(status, body))

    events, history = chat(client_for, users, project, rojo, message="List the files.")

    assert [e.type for e in events] == ["START", "ERROR", "DONE"]
    message = events[1].data["message"]
    assert words in message and f"answered {status}" in message
    assert [m.role for m in history] == ["user"]


@pytest.mark.parametrize("kind", ["text/event-stream", "application/json"])
def test_an_empty_200_says_the_provider_sent_nothing_and_where_to_look(
    client_for, users, project, rojo, fake_provider, kind
):
    """llama-cpp-python 0.3 answers a streamed request with tools 200 and an empty body
    (only its log says why). The user is told just that, not that a response was cut short
    or a connection broke; nothing runs or is stored, and the next message is answered."""
    empty = HttpError(status=200, body="", headers={"content-type": kind})
    fake_provider.add(empty, stream(text_chunks("Here.")))
    client = client_for(users["editor"])

    events = client.chat(project.pk, rojo=rojo.slug, message="List the files.")

    assert [e.type for e in events] == ["START", "ERROR", "DONE"]
    message = events[1].data["message"]
    assert "answered with an empty body" in message and "log" in message
    assert fake_provider.base_url in message
    assert "broke" not in message and "ended before it finished" not in message
    conversation = events[0].data["conversation"]
    assert [m.role for m in stored_history(conversation)] == ["user"]
    again = client.chat(project.pk, rojo=rojo.slug, message="Again.", conversation=conversation)
    assert seen(again) == [("START",), ("CHAT", "Here."), ("DONE",)]


def test_openrouter_error_mid_stream_with_finish_reason_error_keeps_the_text(
    client_for, users, project, rojo, fake_provider
):
    """OpenRouter reports an upstream failure mid-stream as a chunk with an `error` and the
    finish reason "error": the text shown so far is kept, the error is the provider's words."""
    model = "anthropic/claude-sonnet-4.5"
    error = {"code": 502, "message": "Upstream provider disconnected"}
    failed = delta(model, {"content": ""}, "error", error=error)
    fake_provider.add(
        stream(
            ": OPENROUTER PROCESSING\n\n",
            data(delta(model, {"role": "assistant", "content": "Looking at "})),
            data(failed),
        )
    )

    events, history = chat(client_for, users, project, rojo, message="List the files.")

    assert seen(events) == [("START",), ("CHAT", "Looking at "), ("ERROR",), ("DONE",)]
    assert "Upstream provider disconnected" in events[-2].data["message"]
    assert [(m.role, m.content) for m in history] == [
        ("user", "List the files."), ("assistant", "Looking at ")
    ]  # fmt: skip


def test_llama_server_behind_a_proxy_refusing_a_long_prompt_with_500_is_not_sent_it_again(
    client_for, users, project, fake_provider, settings
):
    """llama-server answers a prompt over its context 500 `exceed_context_size_error`; a
    proxy in front of it (Caddy's `encode`, say) sends that body in chunks, with no length.
    The SDK retries a 500, so the same prompt went twice more before the turn read the
    refusal; it goes once, then once more made to fit the `n_ctx` the server stated."""
    settings.ROJO_PROVIDER_RETRIES = 2
    window = 2_000
    body = {
        "error": {
            "code": 500,
            "message": "the request exceeds the available context size, try increasing it",
            "type": "exceed_context_size_error",
            "n_prompt_tokens": 0,
            "n_ctx": window,
        }
    }

    def llama_server(request: dict):
        prompt = prompt_tokens(request)
        if prompt <= window:
            return stream(text_chunks("Read what fits."))
        refusal = {"error": {**body["error"], "n_prompt_tokens": prompt}}
        return http_error(500, refusal, {"transfer-encoding": "chunked"})

    fake_provider.responder = llama_server
    rojo = make_rojo(fake_provider.base_url, tools=[])
    message = "Please check this log:\n" + "".join(f"event {n:05d} ok\n" for n in range(700))

    events, history = chat(client_for, users, project, rojo, message=message)

    assert seen(events) == [("START",), ("CHAT", "Read what fits."), ("DONE",)]
    sizes = [prompt_tokens(request) for request in fake_provider.requests]
    assert len(sizes) == 2 and sizes[0] > window >= sizes[1], sizes
    assert history[0].content == message
