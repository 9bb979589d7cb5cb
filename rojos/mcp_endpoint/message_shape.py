"""A body that is not one JSON-RPC message, refused in a few words of its own.

The SDK's transport answered JSON of the wrong shape (a number, an object without a
"method", "jsonrpc": "1.0") with its validation error: -32602, invalid params, and up to
seven pydantic reports naming its model classes. A request whose "id" was no string or
whole number (1.5, true, null, an object) it took for a notification: 202, and the client
waited for good for an answer that never came. Here the body is read whole, after its
access is checked and within the body limit (./body_limit.py: the SDK would hold as much),
parsed as the SDK parses it, and a body that is not JSON is answered -32700 (parse error),
one of the wrong shape -32600 (invalid request), saying what is wrong. A good body goes
on to the SDK as one message. The SDK's parser refuses a lone surrogate escape (half an
emoji, which a JavaScript client's JSON.stringify writes): such a body is parsed again,
each made U+FFFD, and handed on written anew; so is a NUL's escape.
"""

import json
import re
from typing import Any

import pydantic_core
from mcp_types import INVALID_REQUEST, PARSE_ERROR
from starlette.types import Message, Receive, Send

from rojos.provider.wire_text import lenient_loads, nul_escapes_replaced

from .rpc_errors import rpc_error_send

_HALF_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")  # a surrogate's escape, \ud800 to \udfff
_ID = '"id" must be a string or a whole number'
_SEND = 'send one object with "jsonrpc": "2.0", a "method" and, for a request, an "id"'


class WholeBody:
    """A request's receive, its body read whole first and then given to the app as one
    message."""

    def __init__(self, receive: Receive) -> None:
        self._receive = receive
        self._held: list[Message] = []

    async def read(self) -> bytes | None:
        """The whole body; None when it ends early (the client gone, or cut off at the
        limit), for the app to see as it would have."""
        chunks = []
        while True:
            message = await self._receive()
            if message["type"] != "http.request":
                self._held = [message]
                return None
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        self.hold(body)
        return body

    def hold(self, body: bytes) -> None:
        """Give the app `body`, whole, as the request's."""
        self._held = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive(self) -> Message:
        if self._held:
            return self._held.pop(0)
        return await self._receive()


def _kind(value: Any) -> str:
    kinds = {bool: "a boolean", str: "a string", list: "an array", type(None): "null"}
    return kinds.get(type(value), "a number")


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_id(value: Any) -> bool:
    return isinstance(value, str) or _whole(value)


def _shape_problem(message: Any) -> str | None:
    """What is wrong with a parsed body as one JSON-RPC message (MCP's: object params,
    ids never null in a request), or None."""
    if not isinstance(message, dict):
        return f"The body is {_kind(message)}, not a JSON-RPC message: {_SEND}"
    if message.get("jsonrpc") != "2.0":
        return f'"jsonrpc" must be "2.0": {_SEND}'
    answers = [key for key in ("result", "error") if key in message]
    if "method" in message:
        if answers:
            return f'A request or notification has no "{answers[0]}"'
        if not isinstance(message["method"], str):
            return '"method" must be a string'
        if message.get("params") is not None and not isinstance(message["params"], dict):
            return '"params" must be an object'
        if "id" in message and not _is_id(message["id"]):
            return f"{_ID} (leave it out for a notification)"
        return None
    if answers == ["result"]:  # an answer to a request of the server's
        if not _is_id(message.get("id")):
            return _ID
        return None if isinstance(message["result"], dict) else '"result" must be an object'
    if answers == ["error"]:
        if "id" not in message or not (message["id"] is None or _is_id(message["id"])):
            return f"{_ID}, or null"
        error = message["error"] if isinstance(message["error"], dict) else {}
        if _whole(error.get("code")) and isinstance(error.get("message"), str):
            return None
        return '"error" must be an object with a whole-number "code" and a string "message"'
    if answers:
        return 'An answer has a "result" or an "error", not both'
    return f'The message has no "method": {_SEND}'


async def body_checked(body: bytes, send: Send) -> bytes | None:
    """The body to hand on, as sent or with each lone UTF-16 half made U+FFFD; None once a
    body that is not one JSON-RPC message is answered (400). A NUL it encodes becomes
    U+FFFD, as in the API's bodies (rojos.web.json_bodies): no store keeps one (PostgreSQL's
    jsonb refuses it), so the call's record could not be stored."""
    if b"\\u0000" in body:
        body = nul_escapes_replaced(body)
    try:
        message = pydantic_core.from_json(body)
    except ValueError as exc:
        message = _halves_replaced(body)
        if message is None:
            problem = f"Parse error: the body is not JSON ({exc})"
            await rpc_error_send(send, code=PARSE_ERROR, message=problem)
            return None
        body = json.dumps(message, ensure_ascii=False).encode()
    if (problem := _shape_problem(message)) is None:
        return body
    await rpc_error_send(send, code=INVALID_REQUEST, message=f"Invalid request: {problem}")
    return None


def _halves_replaced(body: bytes) -> Any | None:
    """A body the SDK's parser refused for a lone surrogate escape (`\\ud83d`: an emoji cut
    in two, as JavaScript strings may carry and JSON.stringify writes), parsed with each
    become U+FFFD, as the API and the providers' streams have it (rojos.provider.wire_text);
    None for a body that is not JSON for another reason."""
    if not _HALF_ESCAPE.search(body):
        return None
    try:
        return lenient_loads(body)
    except (ValueError, RecursionError):
        return None
