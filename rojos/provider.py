"""Reading any OpenAI-compatible chat-completions stream: the provider quirks live here only.

The request goes through the SDK (auth, retries, timeouts and base URL stay the SDK's); the
stream is read as raw server-sent-event lines and each chunk parsed once, with orjson:
building a typed SDK object per chunk costs more CPU than the rest of a turn.
"""

import asyncio
import contextlib
import json
import secrets
import string
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import httpx2
import openai
import orjson

from .errors import ProviderError
from .stream_body import Read, body_reader

# Delta keys the accumulator understands; anything else a provider adds is kept verbatim.
_KNOWN_DELTA_KEYS = frozenset(
    {"role", "content", "tool_calls", "reasoning_content", "reasoning", "refusal", "function_call"}
)
_KNOWN_CALL_KEYS = frozenset({"index", "id", "type", "function"})
_ID_ALPHABET = string.ascii_letters + string.digits


def new_call_id() -> str:
    """An id for a tool call that arrived without one."""
    return "call_" + "".join(secrets.choice(_ID_ALPHABET) for _ in range(24))


@dataclass(slots=True)
class _Call:
    id: str | None = None
    index: int | None = None
    name: str = ""
    arguments: list[str] = field(default_factory=list)
    extra: dict = field(default_factory=dict)

    def arguments_text(self) -> str:
        return "".join(self.arguments)

    def looks_complete(self) -> bool:
        text = self.arguments_text().strip()
        if not text:
            return False
        try:
            json.loads(text)
        except ValueError:
            return False
        return True


@dataclass(slots=True)
class Completion:
    """One finished model response: its text and the tool calls to run, in stored form."""

    text: str
    reasoning: str
    tool_calls: list[dict]
    extra: dict
    usage: dict | None
    finish_reason: str | None


class StreamAccumulator:
    """Folds chat-completion chunks into text deltas and, at the end, whole tool calls.

    Rules (see PROVIDERS.md): a call with a new non-empty id starts a new call; otherwise
    match by index; otherwise continue the last open call. Names and ids are never
    concatenated; arguments are joined and parsed only later, by the tool registry.
    """

    def __init__(self) -> None:
        self.text_parts: list[str] = []
        self.reasoning_parts: list[str] = []
        self.calls: list[_Call] = []
        self._by_id: dict[str, _Call] = {}
        self._by_index: dict[int, _Call] = {}
        self.extra: dict = {}
        self.usage: dict | None = None
        self.finish_reason: str | None = None

    @property
    def text(self) -> str:
        return "".join(self.text_parts)

    def feed(self, chunk: dict) -> str:
        """Take one parsed chunk; return the text it adds (possibly "")."""
        if not isinstance(chunk, dict):
            raise ProviderError("The provider sent a malformed stream chunk.")
        error = chunk.get("error")
        if error:
            raise ProviderError(_mid_stream_message(error))
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        choices = chunk.get("choices") or ()
        try:
            if len(choices) == 1:  # nearly every chunk: no generator and join for it
                return self._take_choice(choices[0])
            return "".join(self._take_choice(choice) for choice in choices)
        except (AttributeError, TypeError, KeyError):
            raise ProviderError("The provider sent a malformed stream chunk.") from None

    def _take_choice(self, choice: dict) -> str:
        if choice.get("finish_reason"):
            self.finish_reason = choice["finish_reason"]
        return self._take_delta(choice.get("delta") or choice.get("message") or {})

    def _take_delta(self, delta: dict) -> str:
        text = ""
        content = delta.get("content")
        if isinstance(content, str):
            text = content
        elif isinstance(content, list):  # typed parts (Mistral reasoning models)
            for part in content:
                if not isinstance(part, dict):
                    continue
                if part.get("type") == "text":
                    text += part.get("text") or ""
                elif part.get("type") == "thinking":
                    self.reasoning_parts.append(_thinking_text(part))
        if text:
            self.text_parts.append(text)
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        if isinstance(reasoning, str):
            self.reasoning_parts.append(reasoning)
        for raw in delta.get("tool_calls") or ():
            self._take_call_delta(raw)
        for key, value in delta.items():
            if key not in _KNOWN_DELTA_KEYS and value is not None:
                self.extra[key] = value
        return text

    def _take_call_delta(self, raw: dict) -> None:
        """Add one tool-call delta to the call it continues, or start the next call.

        OpenAI sends the id and name once, then the index alone. Others repeat them on
        every delta; Ollama puts every call at index 0 with its own id; Gemini sends whole
        calls with neither id nor index; Poolside changes the id after the first delta;
        DeepSeek, GLM and Kimi may give parallel calls one id at different indexes. A new
        call always brings its name, so a nameless delta continues a call.
        """
        call_id = raw.get("id") or None
        index = raw.get("index") if isinstance(raw.get("index"), int) else None
        function = raw.get("function") or {}
        name = function.get("name") or ""
        at_index = self._by_index.get(index) if index is not None else None
        call = None
        if call_id and call_id in self._by_id:
            known = self._by_id[call_id]
            if index is None or known.index is None or known.index == index:
                call = known
            else:  # the same id at another index is another call
                call = at_index
        elif call_id and not name and (at_index is not None or (index is None and self.calls)):
            call = at_index if at_index is not None else self.calls[-1]
        elif not call_id and at_index is not None:
            call = at_index
        elif not call_id and index is None and self.calls:
            last = self.calls[-1]
            # Whole calls without id or index (seen from Gemini): a named delta after a
            # complete call, or naming another tool, is the next call, not more of the same.
            starts_new = (
                bool(name) and bool(last.name) and (name != last.name or last.looks_complete())
            )
            call = None if starts_new else last
        if call is None:
            call = _Call(index=index)
            self.calls.append(call)
        if call_id and call.id is None:
            call.id = call_id
        if call_id and call_id not in self._by_id:
            self._by_id[call_id] = call
        if index is not None:
            self._by_index[index] = call
        if name and not call.name:
            call.name = name
        arguments = function.get("arguments")
        if isinstance(arguments, dict):
            arguments = json.dumps(arguments)
        if isinstance(arguments, str) and arguments:
            call.arguments.append(arguments)
        for key, value in raw.items():
            if key not in _KNOWN_CALL_KEYS and value is not None:
                call.extra[key] = value

    def result(self, taken: frozenset[str] = frozenset()) -> Completion:
        """The finished response; raises ProviderError when the stream did not finish.

        A call without an id, or with one of `taken` (the conversation's earlier calls) or
        of another call here, gets a new one: some servers number calls per response
        ("create_directory:0" from vLLM's Kimi parser), and results and undo records are
        matched to calls by id.
        """
        if self.finish_reason is None:
            raise ProviderError(
                "The provider's response ended before it finished (no finish reason); "
                "nothing from the unfinished part was run."
            )
        tool_calls = []
        seen: set[str | None] = {None, *taken}
        for call in self.calls:
            if not call.name:
                raise ProviderError("The provider sent a tool call without a name.")
            if call.id in seen:
                call.id = new_call_id()
            seen.add(call.id)
            tool_calls.append(
                {
                    **call.extra,
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments_text()},
                }
            )
        return Completion(
            text=self.text,
            reasoning="".join(self.reasoning_parts),
            tool_calls=tool_calls,
            extra=self.extra,
            usage=self.usage,
            finish_reason=self.finish_reason,
        )


def _thinking_text(part: dict) -> str:
    thinking = part.get("thinking")
    if isinstance(thinking, str):
        return thinking
    if isinstance(thinking, list):
        return "".join(p.get("text", "") for p in thinking if isinstance(p, dict))
    return ""


def error_text(error: Any) -> str:
    """The human part of a provider's error body, whatever its shape, in 500 characters."""
    return _error_text(error)[:500]


def _error_text(error: Any) -> str:
    if isinstance(error, list):
        if error and all(isinstance(item, dict) and "msg" in item for item in error):
            return "; ".join(_invalid_field(item) for item in error)  # FastAPI's 422 (Mistral)
        return _error_text(error[0]) if error else ""
    if not isinstance(error, dict):
        return str(error)
    inner = error.get("error")
    if inner is not None and inner is not error:
        return _error_text(inner)
    message = error.get("message") or error.get("detail") or error.get("msg")
    if not message:
        return json.dumps(error)
    text = message if isinstance(message, str) else _error_text(message)
    metadata = error.get("metadata")
    raw = metadata.get("raw") if isinstance(metadata, dict) else None
    if raw:  # OpenRouter: the upstream provider's own error
        with contextlib.suppress(ValueError, TypeError):
            raw = json.loads(raw)
        text += f" ({_error_text(raw)})"
    return text


def _invalid_field(item: dict) -> str:
    """One field a FastAPI server refused: where, then why (never the input it echoes)."""
    where = ".".join(str(part) for part in item.get("loc") or () if part != "body")
    return f"{where}: {item['msg']}" if where else str(item["msg"])


async def provider_chunks(client: openai.AsyncOpenAI, request: dict) -> AsyncIterator[list[dict]]:
    """Yield the parsed chunks of one streaming chat completion, a list per network read.

    A fast stream brings several chunks per read; handing them over together crosses this
    generator once per read instead of once per chunk.

    The request goes through the SDK's generic `post` (its auth, retries, timeouts, base URL
    and error types) as the plain JSON body it already is: the typed `create` would first
    walk every message and tool definition against its parameter types, about 0.6 ms a
    request. The body is read as raw bytes, split into lines here, each chunk parsed once.
    Transport and HTTP failures become ProviderError; a stream that ends early simply stops,
    and the accumulator then reports it as unfinished.
    """
    try:
        response = await client.post(
            "/chat/completions", body=request, cast_to=httpx2.Response, stream=True
        )
        try:
            if response.headers.get("content-type", "").startswith("application/json"):
                # A server that ignored stream=true and answered with one JSON completion.
                yield [_checked(json.loads(await response.aread()), client.api_key)]
                return
            rest = b""
            with body_reader(response, _read_timeout(client)) as read:
                while data := await read():
                    lines, rest = _lines(rest + data)
                    chunks: list[dict] = []
                    try:
                        done = _parse_lines(lines, chunks, client.api_key)
                    except ProviderError:
                        if chunks:
                            yield chunks  # what came before the error in the same read counts
                        raise
                    if chunks:
                        yield chunks
                    if done:
                        await _drain(read)
                        return
        finally:
            await response.aclose()
    except openai.APIStatusError as exc:
        raise ProviderError(_status_message(exc, client)) from None
    except openai.APIConnectionError as exc:  # APITimeoutError included
        if _timed_out(exc):
            raise ProviderError(
                f"The provider at {client.base_url} did not answer in time. "
                "Check that it is running and not overloaded."
            ) from None
        raise ProviderError(
            f"Could not connect to the provider at {client.base_url}. Check that it is running "
            "and that the rojo's base URL (ROJO_BASE_URL for the demo rojo) is right."
        ) from None
    except (httpx2.HTTPError, aiohttp.ClientError, ValueError) as exc:
        if isinstance(exc, (TimeoutError, httpx2.TimeoutException)):
            raise ProviderError(
                f"The provider at {client.base_url} stopped sending mid-response for longer "
                "than its timeout (ROJO_PROVIDER_TIMEOUT)."
            ) from None
        raise ProviderError(
            f"The connection to the provider at {client.base_url} broke mid-response "
            f"({exc.__class__.__name__})."
        ) from None


def _parse_lines(lines: list[bytes], chunks: list[dict], secret: str | None) -> bool:
    """Parse SSE lines into `chunks`; True once [DONE] is read (what follows is ignored)."""
    for line in lines:
        if line.startswith(b"data:"):
            payload = line[5:].strip()
            if payload == b"[DONE]":
                return True
            if payload:
                chunks.append(_checked(_parse_chunk(payload), secret))
        elif line.startswith(b"error:"):  # older llama.cpp's non-standard error line
            text = line[6:].strip().decode(errors="replace")
            raise ProviderError(scrub(f"The provider reported an error: {text}", secret))
    return False


def _read_timeout(client: openai.AsyncOpenAI) -> float | None:
    timeout = client.timeout
    return timeout.read if isinstance(timeout, httpx2.Timeout) else timeout


async def _drain(read: Read) -> None:
    """Read the end of the body after [DONE], so that the connection goes back to the pool
    (one closed unread would be dropped); a server that keeps it open gets a second."""
    with contextlib.suppress(TimeoutError, httpx2.HTTPError, aiohttp.ClientError):
        async with asyncio.timeout(1):
            while await read():
                pass


def _timed_out(exc: BaseException) -> bool:
    """Whether a transport failure was a timeout, judged by its first cause.

    The SDK's aiohttp adapter maps every aiohttp connection error, a refused connection
    included, to a connect *timeout*; aiohttp's own exception says what happened.
    """
    while exc.__cause__ is not None:
        exc = exc.__cause__
    if isinstance(exc, aiohttp.ClientError):
        return isinstance(exc, TimeoutError)
    return isinstance(exc, (TimeoutError, httpx2.TimeoutException, openai.APITimeoutError))


def _mid_stream_message(error: Any) -> str:
    return f"The provider reported an error mid-stream: {error_text(error)}"


def _checked(chunk: Any, secret: str | None) -> Any:
    """The chunk, unless it is an error object: that ends the turn, without the key in sight."""
    if isinstance(chunk, dict) and chunk.get("error"):
        raise ProviderError(scrub(_mid_stream_message(chunk["error"]), secret))
    return chunk


def _lines(buffer: bytes) -> tuple[list[bytes], bytes]:
    """The complete lines in `buffer` (ended by \\n, \\r\\n or \\r), and the unfinished rest."""
    lines = buffer.splitlines()
    if lines and not buffer.endswith((b"\n", b"\r")):
        return lines, lines.pop()
    return lines, b""


def _parse_chunk(data: bytes) -> dict:
    try:
        return orjson.loads(data)  # a few times faster than json.loads, once per chunk
    except ValueError:
        raise ProviderError("The provider sent a stream chunk that is not valid JSON.") from None


_HINTS = {
    400: "The provider rejected the request.",
    401: "The provider rejected the API key: set the rojo's API key (ROJO_API_KEY for the demo).",
    403: "The provider refused access with this API key.",
    404: "The model or endpoint was not found: check the rojo's base URL and model name.",
    408: "The provider timed out.",
    413: "The request was too large for the provider.",
    422: "The provider could not process the request.",
    429: "The provider is rate-limiting or the quota is used up; try again later.",
}


def _status_message(exc: openai.APIStatusError, client: openai.AsyncOpenAI) -> str:
    status = exc.status_code
    hint = _HINTS.get(status, "The provider failed." if status >= 500 else "")
    detail = scrub(error_text(exc.body) if exc.body is not None else exc.message, client.api_key)
    return f"{hint} The provider at {client.base_url} answered {status}: {detail}".strip()


def scrub(text: str, secret: str | None) -> str:
    """Remove a secret (an API key) from a message before anyone sees it."""
    if secret and len(secret) >= 4:
        text = text.replace(secret, "***")
    return text
