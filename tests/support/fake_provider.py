"""A scripted OpenAI-compatible provider: a real HTTP server on 127.0.0.1, plus reply builders.

Tests queue replies with `fake_provider.add(...)`; each POST /v1/chat/completions consumes the
next one (a function of the request body makes its reply from what was sent), and every
request body and its headers are recorded. Streams are sent with chunked transfer encoding so
that `stream(..., cut=True)` is a real protocol error for the client.

Like a real server it counts tokens (its own rule, not the app's estimate) and reports usage
in the stream's last chunk when asked (`stream_options`). Given a `Window`, it refuses a
prompt over it in the words of one real provider, or, like Ollama, silently cuts the oldest
messages: the `fake_provider` fixture fails a test in which that ever happened. It can also
refuse `stream_options` as older servers do, and list its window where each server does.
`tests/support/provider_profiles.py` makes it answer like one real provider throughout.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import itertools
import json
import re
import secrets
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

import pytest

MODEL = "fake-model"
NO_REPLY_MESSAGE = "fake provider: no scripted reply"
# How long a reply waits for the others of its `together` barrier before giving up.
TOGETHER_TIMEOUT = 10


@dataclass(frozen=True)
class Pause:
    """In a stream's chunks: the provider sends nothing for this many seconds."""

    seconds: float


@dataclass(frozen=True)
class Gate:
    """In a stream's chunks: the provider sends nothing more until `opened` is set (by the test,
    once the chunks before it reached the client), and cuts the stream if that takes `timeout`
    seconds. A reply that reaches the client only whole (buffered on the way) then fails the
    test, and nothing is timed."""

    opened: threading.Event
    timeout: float = 60.0


# dicts go out as `data: <json>` lines, strings and bytes verbatim (bytes may cut a UTF-8
# character in two, as a TCP segment can).
Chunk = dict[str, Any] | str | bytes | Pause | Gate


@dataclass(frozen=True, kw_only=True)
class Stream:
    """A 200 `text/event-stream` reply, written chunk by chunk."""

    chunks: tuple[Chunk, ...]
    delay: float = 0.0
    first_byte_delay: float = 0.0
    done: bool = True
    cut: bool = False
    together: threading.Barrier | None = None


@dataclass(frozen=True, kw_only=True)
class HttpError:
    """An error status with a JSON (object or array) or raw text body."""

    status: int
    body: dict[str, Any] | list[Any] | str
    headers: dict[str, str]


@dataclass(frozen=True, kw_only=True)
class JsonReply:
    """A non-streaming 200 JSON reply."""

    body: dict[str, Any]


Reply = Stream | HttpError | JsonReply
# A reply made from the request's body when it arrives: a model that reads what it was sent.
Responder = Callable[[dict[str, Any]], Reply]

OverflowShape = Literal[
    "openai",
    "anthropic",
    "anthropic_output",
    "gemini",
    "vllm",
    "llamacpp",
    "llamacpp_line",
    "localai",
    "openrouter",
    "mistral",
    "bare",
    "ollama",
]
OVERFLOW_SHAPES: tuple[OverflowShape, ...] = (
    "openai",
    "anthropic",
    "anthropic_output",
    "gemini",
    "vllm",
    "llamacpp",
    "localai",
    "openrouter",
    "mistral",
)


@dataclass(frozen=True, kw_only=True)
class Window:
    """The served model's context window, and how the server answers a prompt over it.

    `listed_by` makes the server list the window where one real server does: vLLM's
    /v1/models `max_model_len`, llama.cpp's /props `n_ctx`, Ollama's /api/show, LM Studio's
    /api/v0/models, OpenRouter's /models `context_length`.
    """

    tokens: int
    shape: OverflowShape = "openai"
    listed_by: Literal["vllm", "llamacpp", "ollama", "lmstudio", "openrouter"] | None = None


_TOKEN = re.compile(r"\w{1,5}|[^\w\s]")


def count_tokens(text: str) -> int:
    """Tokens as this server counts them: runs of up to five word characters, and each sign."""
    return len(_TOKEN.findall(text))


def prompt_tokens(body: dict[str, Any]) -> int:
    """The prompt's tokens: every message's text and calls, 4 per message, and the tools."""
    total = count_tokens(json.dumps(body.get("tools") or []))
    for message in body.get("messages") or ():
        total += 4 + count_tokens(_message_text(message))
    return total


def _message_text(message: dict[str, Any]) -> str:
    content = message.get("content")
    text = content if isinstance(content, str) else json.dumps(content or "")
    for call in message.get("tool_calls") or ():
        text += " " + json.dumps(call.get("function") or {})
    return text


def overflow_error(shape: OverflowShape, prompt: int, window: int) -> HttpError | Stream:
    """The error a real provider answers to a prompt over its window (PROVIDERS.md)."""
    match shape:
        case "openai":
            body: Any = _error_body(
                f"This model's maximum context length is {window} tokens. However, your "
                f"messages resulted in {prompt} tokens. Please reduce the length of the "
                "messages.",
                code="context_length_exceeded",
            )
            body["error"]["param"] = "messages"
            return HttpError(status=400, body=body, headers={})
        case "anthropic":
            body = {
                "type": "error",
                "error": {
                    "type": "invalid_request_error",
                    "message": f"prompt is too long: {prompt} tokens > {window} maximum",
                },
            }
            return HttpError(status=400, body=body, headers={})
        case "anthropic_output":  # the prompt and the reply's room (max_tokens) together
            body = {
                "type": "error",
                "error": {
                    "type": "invalid_request_error",
                    "message": f"input length and `max_tokens` exceed context limit: {prompt} + "
                    f"4096 > {window}, decrease input length or `max_tokens` and try again",
                },
            }
            return HttpError(status=400, body=body, headers={})
        case "gemini":
            message = (
                f"The input token count ({prompt}) exceeds the maximum number of tokens "
                f"allowed ({window})."
            )
            body = [{"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}}]
            return HttpError(status=400, body=body, headers={})
        case "vllm":
            message = (
                f"This model's maximum context length is {window} tokens. However, you "
                f"requested {prompt + 16} tokens ({prompt} in the messages, 16 in the "
                "completion). Please reduce the length of the messages or completion."
            )
            body = {"object": "error", "message": message, "type": "BadRequestError", "code": 400}
            return HttpError(status=400, body=body, headers={})
        case "llamacpp":  # some versions answer 500, others 400: the body is what counts
            error = {
                "code": 500,
                "message": "the request exceeds the available context size, try increasing it",
                "type": "exceed_context_size_error",
                "n_prompt_tokens": prompt,
                "n_ctx": window,
            }
            return HttpError(status=500, body={"error": error}, headers={})
        case "llamacpp_line":  # older llama.cpp, streaming: 200, then its own `error:` line
            error = {
                "code": 400,
                "message": "the request exceeds the available context size, try increasing "
                "the context size or enable context shift",
                "type": "invalid_request_error",
            }
            return Stream(chunks=(f"error: {json.dumps(error)}\n\n",), done=False)
        case "localai":  # llama.cpp's words through a gateway: no n_ctx, a 500
            error = {
                "code": 500,
                "message": f"rpc error: code = Internal desc = request ({prompt} tokens) exceeds "
                f"the available context size ({window} tokens), try increasing it",
                "type": "",
            }
            return HttpError(status=500, body={"error": error}, headers={})
        case "openrouter":
            message = (
                f"This endpoint's maximum context length is {window} tokens. However, you "
                f"requested about {prompt} tokens ({prompt} of text input). Please reduce the "
                'length of either one, or use the "middle-out" transform to compress your '
                "prompt automatically."
            )
            body = {"error": {"message": message, "code": 400, "metadata": {"provider": "x"}}}
            return HttpError(status=400, body=body, headers={})
        case "bare":  # the code alone, neither the window nor the prompt's size
            body = _error_body("context_length_exceeded", code="context_length_exceeded")
            return HttpError(status=400, body=body, headers={})
        case "mistral":
            message = (
                f"Prompt contains {prompt} tokens and 0 draft tokens, too large for model with "
                f"{window} maximum context length"
            )
            body = {
                "object": "error",
                "message": message,
                "type": "invalid_request_message_error",
                "code": "3051",
            }
            return HttpError(status=400, body=body, headers={})
    raise ValueError(f"no overflow error for {shape!r}")


def stream_options_refusal(shape: Literal["openai", "fastapi"]) -> HttpError:
    """How servers that do not know `stream_options` refuse it."""
    if shape == "fastapi":  # a strict FastAPI server (Mistral-like): 422, the field listed
        detail = [
            {
                "type": "extra_forbidden",
                "loc": ["body", "stream_options"],
                "msg": "Extra inputs are not permitted",
            }
        ]
        return HttpError(status=422, body={"detail": detail}, headers={})
    return HttpError(
        status=400,
        body=_error_body("Unrecognized request argument supplied: stream_options"),
        headers={},
    )


def stream(
    *chunks: Chunk | list[Chunk],
    delay: float = 0.0,
    first_byte_delay: float = 0.0,
    done: bool = True,
    cut: bool = False,
    together: threading.Barrier | None = None,
) -> Stream:
    """A streamed reply: dicts go out as `data: <json>`, strings and bytes verbatim, lists are
    flattened.

    Replies given the same `together` barrier start only once all of them were requested, so
    that concurrent turns get their replies at the same moment.
    """
    flat: list[Chunk] = []
    for item in chunks:
        flat.extend(item if isinstance(item, list) else [item])
    return Stream(
        chunks=tuple(flat),
        delay=delay,
        first_byte_delay=first_byte_delay,
        done=done,
        cut=cut,
        together=together,
    )


def http_error(
    status: int,
    body: dict[str, Any] | list[Any] | str | None = None,
    headers: dict[str, str] | None = None,
) -> HttpError:
    """An HTTP error reply; the default body is OpenAI-shaped."""
    if body is None:
        kind = "invalid_request_error" if status < 500 else "server_error"
        body = _error_body(f"fake provider error (HTTP {status})", kind, code=str(status))
    return HttpError(status=status, body=body, headers=dict(headers or {}))


def json_reply(body: dict[str, Any]) -> JsonReply:
    """A non-streaming 200 JSON reply."""
    return JsonReply(body=body)


def chunk(
    delta: dict[str, Any] | None = None, finish_reason: str | None = None, **extra: Any
) -> dict[str, Any]:
    """One `chat.completion.chunk` with a single choice; `extra` keys are merged at top level."""
    choice = {"index": 0, "delta": delta or {}, "finish_reason": finish_reason}
    return {**_envelope(), "choices": [choice], **extra}


def text_chunks(text: str, pieces: int = 1, finish: str | None = "stop") -> list[dict[str, Any]]:
    """`text` as `pieces` contiguous content deltas, then a finish chunk unless `finish` is None."""
    if pieces < 1:
        raise ValueError(f"pieces must be at least 1, got {pieces!r}")
    cuts = [len(text) * i // pieces for i in range(pieces + 1)]
    chunks = [chunk({"content": text[a:b]}) for a, b in itertools.pairwise(cuts)]
    chunks[0]["choices"][0]["delta"]["role"] = "assistant"
    if finish is not None:
        chunks.append(chunk({}, finish))
    return chunks


ReasoningShape = Literal["reasoning_content", "reasoning", "think"]
# The three ways providers stream thinking (PROVIDERS.md, "Reasoning"): vLLM, LM Studio and
# DeepSeek; Ollama and OpenRouter; some local chat templates, in the content.
REASONING_SHAPES: tuple[ReasoningShape, ...] = ("reasoning_content", "reasoning", "think")


def reasoning_chunks(pieces: list[str], shape: ReasoningShape) -> list[list[dict[str, Any]]]:
    """Thinking of `pieces` as `shape` streams it: one group of chunks per piece, so that a
    test can put a Gate between them. In content, the tags are split across chunks
    ("<thi" "nk>", "</th" "ink>") as a tokenizer may split them."""
    if shape == "think":
        groups = [[chunk({"content": piece})] for piece in pieces]
        groups[0][:0] = [chunk({"content": "<thi"}), chunk({"content": "nk>"})]
        groups[-1] += [chunk({"content": "</th"}), chunk({"content": "ink>\n\n"})]
    else:
        groups = [[chunk({shape: piece})] for piece in pieces]
    groups[0][0]["choices"][0]["delta"]["role"] = "assistant"
    return groups


def tool_call_chunks(
    calls: list[tuple[str, dict[str, Any] | str | None]],
    *,
    ids: Literal["first", "every", "none"] = "first",
    index: Literal["normal", "missing", "zero"] = "normal",
    arguments: Literal["fragments", "whole", "trailing_empty"] = "fragments",
    text_before: str | None = None,
    finish: str | None = "tool_calls",
    finish_in_last: bool = False,
    extra: dict[str, Any] | None = None,
    empty_name_on_continuation: bool = False,
) -> list[dict[str, Any]]:
    """Tool-call deltas shaped like one provider's quirks; None args omit the `arguments` key."""
    _check_choice("ids", ids, ("first", "every", "none"))
    _check_choice("index", index, ("normal", "missing", "zero"))
    _check_choice("arguments", arguments, ("fragments", "whole", "trailing_empty"))

    def part(n: int, call_id: str, function: dict[str, Any], *, first: bool) -> dict[str, Any]:
        item: dict[str, Any] = {}
        if index != "missing":
            item["index"] = n if index == "normal" else 0
        if ids == "every" or (ids == "first" and first):
            item["id"] = call_id
        if first:
            item["type"] = "function"
        item["function"] = function
        if first and extra:
            item.update(copy.deepcopy(extra))
        return {"tool_calls": [item]}

    deltas: list[dict[str, Any]] = [{"content": piece} for piece in _pieces(text_before)]
    for n, (name, args) in enumerate(calls):
        call_id = f"call_{n}_{secrets.token_hex(4)}"
        args_text = json.dumps(args) if isinstance(args, dict) else args
        more = {"name": ""} if empty_name_on_continuation else {}
        if arguments == "fragments":
            head = {"name": name} if args_text is None else {"name": name, "arguments": ""}
            deltas.append(part(n, call_id, head, first=True))
            deltas += [
                part(n, call_id, {**more, "arguments": p}, first=False) for p in _pieces(args_text)
            ]
        else:
            whole = {"name": name} if args_text is None else {"name": name, "arguments": args_text}
            deltas.append(part(n, call_id, whole, first=True))
            if arguments == "trailing_empty":
                deltas.append(part(n, call_id, {**more, "arguments": ""}, first=False))
    if deltas:
        deltas[0] = {"role": "assistant", **deltas[0]}
    chunks = [chunk(delta) for delta in deltas]
    if finish is not None and finish_in_last and chunks:
        chunks[-1]["choices"][0]["finish_reason"] = finish
    elif finish is not None:
        chunks.append(chunk({}, finish))
    return chunks


def usage_chunk(
    prompt_tokens: int, completion_tokens: int, *, cached: int | None = None, reasoning: int = 0
) -> dict[str, Any]:
    """The usage-only last chunk, with `choices: []`; OpenAI's details when given."""
    usage: dict[str, Any] = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
    if cached is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
    if reasoning:
        usage["completion_tokens_details"] = {"reasoning_tokens": reasoning}
    return {**_envelope(), "choices": [], "usage": usage}


def error_chunk(message: str, code: str | int | None = None) -> dict[str, Any]:
    """A mid-stream error event, as OpenAI and vLLM send it."""
    return {"error": {"message": message, "code": code}}


class FakeProvider:
    """A scripted chat-completions server on a free port of 127.0.0.1 (or of `host`), in a
    daemon thread."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self._lock = threading.Lock()
        self._script: deque[Reply] = deque()
        self._leftovers_allowed = False
        self.window: Window | None = None
        self.refuse_stream_options: Literal["openai", "fastapi"] | None = None
        self.listing_delay = 0.0  # seconds before answering a listing route
        # More models /v1/models lists besides MODEL: each an entry such as {"id": "other",
        # "max_model_len": 8192}; and an error it answers that route with instead.
        self.models: list[dict[str, Any]] = []
        self.models_refused: HttpError | None = None
        # Answers every request the script has no reply for (a model that reads its input).
        self.responder: Responder | None = None
        # Requests a Window of shape "ollama" cut silently (their index in `requests`).
        self.truncated: list[int] = []
        # Requests answered with an overflow error (their index in `requests`).
        self.overflowed: list[int] = []
        self.requests: list[dict[str, Any]] = []
        # The other routes asked (model listings, /props, /api/show), in order.
        self.listing_requests: list[str] = []
        # The headers of each GET among them (a model list asked with the rojo's key).
        self.listing_headers: list[dict[str, str]] = []
        self.headers: list[dict[str, str]] = []
        # The client's (host, port) of each request: the same for requests on one connection.
        self.peers: list[tuple[str, int]] = []
        self._server = _Server((host, 0), _Handler)
        self._server.provider = self
        host, port = self._server.server_address[:2]
        self.base_url = f"http://{host}:{port}/v1"
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), name="fake-provider", daemon=True
        )
        self._thread.start()

    def add(self, *replies: Reply | Responder) -> None:
        """Queue replies; each chat-completions request consumes the next one."""
        for reply in replies:
            if not isinstance(reply, Stream | HttpError | JsonReply) and not callable(reply):
                raise TypeError(
                    f"not a reply (use stream(), http_error(), json_reply()): {reply!r}"
                )
        with self._lock:
            self._script.extend(replies)

    def reset(self) -> None:
        """Forget queued replies and recorded requests."""
        with self._lock:
            self._script.clear()
            self.requests.clear()
            self.listing_requests.clear()
            self.listing_headers.clear()
            self.headers.clear()
            self.peers.clear()
            self._leftovers_allowed = False
            self.window = None
            self.refuse_stream_options = None
            self.listing_delay = 0.0
            self.models = []
            self.models_refused = None
            self.responder = None
            self.truncated.clear()
            self.overflowed.clear()

    @property
    def models_asked(self) -> list[str | None]:
        """The model each chat-completions request asked for, in order."""
        return [body.get("model") for body in self.requests]

    def allow_leftovers(self) -> None:
        """Let the current test end with scripted replies never requested."""
        self._leftovers_allowed = True

    def check_consumed(self) -> None:
        """Raise AssertionError if scripted replies were left unconsumed (and not allowed)."""
        with self._lock:
            left = [_describe(reply) for reply in self._script]
        if left and not self._leftovers_allowed:
            raise AssertionError(
                f"fake provider: scripted replies never requested: {', '.join(left)}"
                " (call fake_provider.allow_leftovers() if that is intended)"
            )

    def close(self) -> None:
        """Stop serving and release the port."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def check_never_truncated(self) -> None:
        """Raise AssertionError if a prompt was ever cut silently (Ollama-like)."""
        if self.truncated:
            raise AssertionError(
                f"fake provider: requests {self.truncated} were over the {self.window.tokens}-"
                "token window and silently cut from the front: the model lost their start"
            )

    def _take(self, body: dict[str, Any], headers: dict[str, str], peer=None) -> Reply | None:
        with self._lock:
            self.requests.append(body)
            self.headers.append(headers)
            self.peers.append(peer)
            if self.refuse_stream_options and "stream_options" in body:
                return stream_options_refusal(self.refuse_stream_options)
            prompt = prompt_tokens(body)
            window = self.window
            if window is not None and prompt > window.tokens:
                if window.shape != "ollama":
                    self.overflowed.append(len(self.requests) - 1)
                    return overflow_error(window.shape, prompt, window.tokens)
                self.truncated.append(len(self.requests) - 1)
                body = _cut_from_front(body, window.tokens)
                prompt = prompt_tokens(body)
            reply = self._script.popleft() if self._script else self.responder
        if callable(reply):
            reply = reply(body)
        return _with_usage(reply, body, prompt)

    def listing(self, route: str, body: dict[str, Any] | None) -> tuple[int, Any] | None:
        """What the server answers on a route where real servers list their window."""
        time.sleep(self.listing_delay)
        window = self.window
        listed = window.listed_by if window else None
        tokens = window.tokens if window else 0
        if route == "/v1/models":
            if self.models_refused is not None:
                return self.models_refused.status, self.models_refused.body
            model: dict[str, Any] = {"id": MODEL, "object": "model"}
            if listed == "vllm":
                model["max_model_len"] = tokens
            elif listed == "openrouter":
                model["context_length"] = tokens
            more = [{"object": "model", **entry} for entry in self.models]
            return 200, {"object": "list", "data": [model, *more]}
        if route == "/props" and listed == "llamacpp":
            return 200, {"default_generation_settings": {"n_ctx": tokens}, "total_slots": 1}
        if route == "/api/show" and listed == "ollama" and (body or {}).get("model") == MODEL:
            return 200, {
                "parameters": f"num_ctx                        {tokens}",
                "model_info": {"general.architecture": "llama", "llama.context_length": 131072},
            }
        if route == f"/api/v0/models/{MODEL}" and listed == "lmstudio":
            return 200, {"id": MODEL, "max_context_length": tokens, "state": "loaded"}
        return None


@pytest.fixture(scope="session")
def fake_provider_server():
    """One fake provider for the whole session."""
    provider = FakeProvider()
    yield provider
    provider.close()


@pytest.fixture
def fake_provider(fake_provider_server: FakeProvider):
    """The fake provider with an empty script; fails the test if replies are left over."""
    fake_provider_server.reset()
    yield fake_provider_server
    try:
        fake_provider_server.check_consumed()
        fake_provider_server.check_never_truncated()
    except AssertionError as err:
        failure = str(err)
    else:
        return
    pytest.fail(failure, pytrace=False)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    provider: FakeProvider

    def handle_error(self, request, client_address):
        # A client that hangs up or idles out is routine here, not a failure worth a traceback.
        if not isinstance(sys.exc_info()[1], ConnectionError | TimeoutError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # paced chunks must leave when written
    timeout = 30  # idle keep-alive connections end instead of holding a thread forever
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        """Say nothing: the tests' output is for their own failures."""

    def do_GET(self) -> None:
        self.server.provider.listing_requests.append(self._route())
        headers = {key.lower(): value for key, value in self.headers.items()}
        self.server.provider.listing_headers.append(headers)
        listed = self.server.provider.listing(self._route(), None)
        if listed is None:
            self._send_not_found()
        else:
            self._send_json(*listed)

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self._route() != "/v1/chat/completions":
            self.server.provider.listing_requests.append(self._route())
            with contextlib.suppress(ValueError):
                listed = self.server.provider.listing(self._route(), json.loads(raw or b"{}"))
                if listed is not None:
                    self._send_json(*listed)
                    return
            self._send_not_found()
            return
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        if not isinstance(body, dict):
            self._send_json(400, _error_body("fake provider: body is not a JSON object"))
            return
        headers = {key.lower(): value for key, value in self.headers.items()}
        match self.server.provider._take(body, headers, self.client_address[:2]):
            case None:
                self._send_json(500, _error_body(NO_REPLY_MESSAGE, "server_error"))
            case HttpError(status=status, body=error_body, headers=extra_headers):
                self._send_json(status, error_body, extra_headers)
            case JsonReply(body=reply_body):
                self._send_json(200, reply_body)
            case Stream() as reply if body.get("stream") is True:
                self._send_stream(reply)
            case Stream():
                message = (
                    'fake provider: a stream was scripted but the request lacks "stream": true'
                )
                self._send_json(500, _error_body(message, "server_error"))

    def _route(self) -> str:
        return self.path.split("?", 1)[0].rstrip("/")

    def _send_not_found(self) -> None:
        self._send_json(404, _error_body(f"fake provider: no route {self.path!r}", code="404"))

    def _send_json(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        """The body with its length, or in chunks with no length when `headers` say
        `transfer-encoding: chunked` (as a proxy that compresses or buffers sends it)."""
        headers = {key.lower(): value for key, value in (headers or {}).items()}
        if isinstance(body, str):
            data = body.encode()
            headers.setdefault("content-type", "text/plain; charset=utf-8")
        else:
            data = json.dumps(body).encode()
            headers.setdefault("content-type", "application/json")
        chunked = headers.get("transfer-encoding") == "chunked"
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        if not chunked:
            self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if not chunked:
            self.wfile.write(data)
            return
        half = len(data) // 2
        for part in (data[:half], data[half:]):
            self._write_chunk(part)
        self.wfile.write(b"0\r\n\r\n")

    def _send_stream(self, reply: Stream) -> None:
        try:
            if reply.together is not None:
                reply.together.wait(timeout=TOGETHER_TIMEOUT)
            time.sleep(reply.first_byte_delay)
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream; charset=utf-8")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for item in reply.chunks:
                time.sleep(reply.delay)
                if isinstance(item, Pause):
                    time.sleep(item.seconds)
                    continue
                if isinstance(item, Gate):
                    if not item.opened.wait(item.timeout):
                        self.close_connection = True
                        self.connection.shutdown(socket.SHUT_RDWR)
                        return
                    continue
                self._write_chunk(
                    item if isinstance(item, str | bytes) else f"data: {json.dumps(item)}\n\n"
                )
            if reply.cut:
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            if reply.done:
                self._write_chunk("data: [DONE]\n\n")
            self.wfile.write(b"0\r\n\r\n")
        except ConnectionError:
            self.close_connection = True

    def _write_chunk(self, text: str | bytes) -> None:
        data = text if isinstance(text, bytes) else text.encode()
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))


def _envelope() -> dict[str, Any]:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": MODEL,
    }


def _error_body(
    message: str, kind: str = "invalid_request_error", code: str | None = None
) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "code": code}}


def _pieces(text: str | None, size: int = 5) -> list[str]:
    text = text or ""
    return [text[i : i + size] for i in range(0, len(text), size)]


def _check_choice(name: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"{name} must be one of {allowed!r}, got {value!r}")


def _describe(reply: Reply | Responder) -> str:
    match reply:
        case Stream(chunks=chunks):
            return f"stream({len(chunks)} chunks)"
        case HttpError(status=status):
            return f"http_error({status})"
        case JsonReply():
            return "json_reply(...)"
        case _:
            return f"responder {getattr(reply, '__name__', reply)!r}"


def _cut_from_front(body: dict[str, Any], window: int) -> dict[str, Any]:
    """What Ollama does with a prompt over `num_ctx`: the oldest messages go, silently."""
    messages = list(body.get("messages") or ())
    system = messages[:1] if messages and messages[0].get("role") == "system" else []
    rest = messages[len(system) :]
    while len(rest) > 1 and prompt_tokens({**body, "messages": system + rest}) > window:
        rest.pop(0)
    return {**body, "messages": system + rest}


def _completion_tokens(chunks: tuple[Chunk, ...]) -> int:
    total = 0
    for item in chunks:
        if isinstance(item, dict):
            for choice in item.get("choices") or ():
                total += count_tokens(_message_text(choice.get("delta") or {}))
    return total


def _has_usage(item: Chunk) -> bool:
    """Whether a scripted chunk carries usage (a raw line written as the provider sends it)."""
    if isinstance(item, dict):
        return "usage" in item
    if isinstance(item, str | bytes):
        return b'"usage"' in (item if isinstance(item, bytes) else item.encode())
    return False


def _with_usage(reply: Reply | None, body: dict[str, Any], prompt: int) -> Reply | None:
    """A stream with the usage chunk real servers add when asked, unless the script has one."""
    asked = (body.get("stream_options") or {}).get("include_usage") is True
    if not asked or not isinstance(reply, Stream) or reply.cut or not reply.done:
        return reply
    if any(_has_usage(item) for item in reply.chunks):
        return reply
    usage = usage_chunk(prompt, _completion_tokens(reply.chunks))
    return dataclasses.replace(reply, chunks=(*reply.chunks, usage))
