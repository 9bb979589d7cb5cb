"""A scripted OpenAI-compatible provider: a real HTTP server on 127.0.0.1, plus reply builders.

Tests queue replies with `fake_provider.add(...)`; each POST /v1/chat/completions consumes the
next one, and every request body and its headers are recorded. Streams are sent with chunked
transfer encoding so that `stream(..., cut=True)` is a real protocol error for the client.
"""

from __future__ import annotations

import copy
import itertools
import json
import secrets
import socket
import sys
import threading
import time
from collections import deque
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


Chunk = dict[str, Any] | str | Pause


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


def stream(
    *chunks: Chunk | list[Chunk],
    delay: float = 0.0,
    first_byte_delay: float = 0.0,
    done: bool = True,
    cut: bool = False,
    together: threading.Barrier | None = None,
) -> Stream:
    """A streamed reply: dicts go out as `data: <json>`, strings verbatim, lists are flattened.

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


def usage_chunk(prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
    """The usage-only last chunk, with `choices: []`."""
    usage = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
    return {**_envelope(), "choices": [], "usage": usage}


def error_chunk(message: str, code: str | int | None = None) -> dict[str, Any]:
    """A mid-stream error event, as OpenAI and vLLM send it."""
    return {"error": {"message": message, "code": code}}


class FakeProvider:
    """A scripted chat-completions server on a free port of 127.0.0.1, in a daemon thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._script: deque[Reply] = deque()
        self._leftovers_allowed = False
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        # The client's (host, port) of each request: the same for requests on one connection.
        self.peers: list[tuple[str, int]] = []
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.provider = self
        host, port = self._server.server_address[:2]
        self.base_url = f"http://{host}:{port}/v1"
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), name="fake-provider", daemon=True
        )
        self._thread.start()

    def add(self, *replies: Reply) -> None:
        """Queue replies; each chat-completions request consumes the next one."""
        for reply in replies:
            if not isinstance(reply, Stream | HttpError | JsonReply):
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
            self.headers.clear()
            self.peers.clear()
            self._leftovers_allowed = False

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

    def _take(self, body: dict[str, Any], headers: dict[str, str], peer=None) -> Reply | None:
        with self._lock:
            self.requests.append(body)
            self.headers.append(headers)
            self.peers.append(peer)
            return self._script.popleft() if self._script else None


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
        if self._route() == "/v1/models":
            self._send_json(200, {"object": "list", "data": [{"id": MODEL, "object": "model"}]})
        else:
            self._send_not_found()

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self._route() != "/v1/chat/completions":
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
        headers = {key.lower(): value for key, value in (headers or {}).items()}
        if isinstance(body, str):
            data = body.encode()
            headers.setdefault("content-type", "text/plain; charset=utf-8")
        else:
            data = json.dumps(body).encode()
            headers.setdefault("content-type", "application/json")
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

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
                self._write_chunk(
                    item if isinstance(item, str) else f"data: {json.dumps(item)}\n\n"
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

    def _write_chunk(self, text: str) -> None:
        data = text.encode()
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


def _describe(reply: Reply) -> str:
    match reply:
        case Stream(chunks=chunks):
            return f"stream({len(chunks)} chunks)"
        case HttpError(status=status):
            return f"http_error({status})"
        case JsonReply():
            return "json_reply(...)"
