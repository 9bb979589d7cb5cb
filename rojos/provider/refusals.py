"""Refusals a turn recovers from: a prompt over the model's window, an option not taken.

Every provider says "the prompt is too long" its own way (PROVIDERS.md, "When the prompt is
too long"): OpenAI's `context_length_exceeded`; Anthropic's "prompt is too long: N tokens >
M maximum", or "input length and `max_tokens` exceed context limit: N + R > M"; Gemini's
"input token count (N) exceeds the maximum number of tokens allowed (M)" inside a JSON
list; vLLM's and OpenRouter's "maximum context length is M tokens"; llama.cpp's
`exceed_context_size_error` with `n_ctx` (as a 400 or a 500), or through a gateway its
"request (N tokens) exceeds the available context size (M tokens)" alone; Mistral's "Prompt
contains N tokens ... too large for model with M maximum context length"; LM Studio's
"context length of only M tokens". The body is read whatever its shape and status, and the
limit it states is kept, so that the next request can be built to fit. Providers that
refuse `stream_options` (older OpenAI-compatible servers; FastAPI ones list it as an extra
field) are told apart the same way, and so are a server's answers that it is not set up
for the request, which no retry helps.
"""

import contextlib
import json
import re
from typing import Any

import httpx2

from rojos.errors import ProviderError
from rojos.provider.failures import error_text
from rojos.scrub import scrub

_NUMBER = r"(\d[\d,]*)"
# (pattern, group of the window's size, group of the prompt's size), tried in order.
_OVERFLOW_TEXTS = [
    (rf"prompt is too long:\s*{_NUMBER} tokens\s*>\s*{_NUMBER}", 2, 1),
    # Anthropic, when the prompt fits but not with the reply's room (max_tokens): N + R > M.
    (
        rf"input length and `?max_tokens`? exceed context limit:\s*{_NUMBER}\s*\+\s*"
        rf"{_NUMBER}\s*>\s*{_NUMBER}",
        3,
        1,
    ),
    # llama.cpp's words without its n_ctx field (a gateway in front of it passes the text).
    (rf"request \({_NUMBER} tokens\) exceeds the available context size \({_NUMBER}", 2, 1),
    (
        rf"input token count\D{{0,4}}{_NUMBER}\)?\s*exceeds the maximum number of tokens "
        rf"allowed\D{{0,4}}{_NUMBER}",
        2,
        1,
    ),
    (rf"prompt contains {_NUMBER} tokens.*?too large for model with {_NUMBER}", 2, 1),
    (
        rf"maximum context length is {_NUMBER} tokens.*?"
        rf"(?:resulted in|requested)\D{{0,7}}{_NUMBER}",
        1,
        2,
    ),
    (rf"maximum context length is {_NUMBER} tokens", 1, None),
    (rf"context length of only {_NUMBER} tokens", 1, None),
    (
        r"context[_ ]length[_ ]exceeded|exceeds? the (?:available )?context (?:size|window|length)"
        r"|context window (?:is )?exceeded|too many tokens in the (?:prompt|input)",
        None,
        None,
    ),
]
_OVERFLOW = [(re.compile(p, re.IGNORECASE | re.DOTALL), w, n) for p, w, n in _OVERFLOW_TEXTS]
# A server not set up for what the request asks, in its own words: llama-server without
# --jinja ("tools param requires --jinja flag", a 500), vLLM without a tool-call parser
# ("requires --enable-auto-tool-choice"), an older llama.cpp ("Unsupported param: tools"), a
# model without tool support. Only the server's operator can change that: no retry helps.
_SET_UP = re.compile(
    r"requires? (?:the )?--[a-z][\w-]*|unsupported param|(?:does not|doesn't) support tool",
    re.IGNORECASE,
)
# vLLM counts the completion in what was "requested"; the prompt alone is "X in the messages".
_IN_MESSAGES = re.compile(rf"{_NUMBER} in the messages", re.IGNORECASE)
_OVERFLOW_CODES = frozenset({"context_length_exceeded", "exceed_context_size_error"})


class ContextOverflow(ProviderError):
    """The provider refused the request as longer than the model's context window."""

    code = "context_overflow"

    def __init__(self, message: str, *, limit: int | None = None, prompt: int | None = None):
        super().__init__(message)
        self.limit = limit  # the window the provider stated, in tokens, when it said
        self.prompt = prompt  # how long it counted the prompt, when it said


class OptionRefused(ProviderError):
    """The provider refused an option the app adds on its own (`stream_options`)."""

    def __init__(self, message: str, *, option: str):
        super().__init__(message)
        self.option = option


def _number(text: str | None) -> int | None:
    digits = re.sub(r"\D", "", text or "")
    return int(digits) if digits else None


def _fields(body: Any) -> list[dict]:
    """Every object in an error body, outermost first (Gemini wraps its error in a list)."""
    found: list[dict] = []
    stack = [body]
    while stack and len(found) < 20:
        item = stack.pop(0)
        if isinstance(item, dict):
            found.append(item)
            stack.extend(v for v in item.values() if isinstance(v, dict | list))
        elif isinstance(item, list):
            stack.extend(item[:5])
    return found


def overflow_of(body: Any, message: str) -> ContextOverflow | None:
    """The overflow an error body reports, with the limit it states; None if it is another error."""
    objects = _fields(body)
    coded = any(
        str(o.get("code") or "") in _OVERFLOW_CODES or str(o.get("type") or "") in _OVERFLOW_CODES
        for o in objects
    )
    limit = next((_number(str(o["n_ctx"])) for o in objects if "n_ctx" in o), None)
    prompt = next(
        (_number(str(o["n_prompt_tokens"])) for o in objects if "n_prompt_tokens" in o), None
    )
    text = error_text(body) if body is not None else ""
    for pattern, window_group, prompt_group in _OVERFLOW:
        match = pattern.search(text)
        if match is None:
            continue
        if window_group and limit is None:
            limit = _number(match.group(window_group))
        if prompt_group and prompt is None:
            in_messages = _IN_MESSAGES.search(text)
            prompt = _number((in_messages or match).group(1 if in_messages else prompt_group))
        coded = True
        break
    if not coded:
        return None
    return ContextOverflow(message, limit=limit, prompt=prompt)


def refusal_of(body: Any, status: int | None, message: str) -> ProviderError | None:
    """A refusal the loop can act on (an overflow, a refused option), or None."""
    overflow = overflow_of(body, message)
    if overflow is not None:
        return overflow
    if status in (400, 422) and "stream_options" in json.dumps(body, default=str):
        return OptionRefused(message, option="stream_options")
    return None


def mid_stream_error(error: Any, secret: str | None) -> ProviderError:
    """The failure for an error object the provider sent inside the stream: a refusal the
    loop acts on, or a ProviderError; either keeps the provider's words apart (`said`)."""
    said = scrub(error_text(error), secret)
    message = f"The provider reported an error mid-stream: {said}"
    failure = refusal_of(error, None, message) or ProviderError(message)
    failure.said = said
    return failure


# The largest error body read to tell an overflow from a transient failure.
_ERROR_BODY_MAX = 64 * 1024


def _set_up_error(body: Any) -> bool:
    """Whether an error body says the server is not set up for the request (`_SET_UP`)."""
    return body is not None and _SET_UP.search(error_text(body)) is not None


async def refusal_not_retried(response: httpx2.Response) -> None:
    """A response hook of the providers' HTTP pool: a 5xx that reports a context overflow
    (llama.cpp answers 500) or a server not set up for the request (llama-server without
    --jinja answers 500) is marked not to be retried, as the SDK would a transient failure:
    the same request would only be refused again (Gemini CLI's loop, #5807), the user
    waiting out the SDK's back-off for it.

    A body without a length (a proxy in front of llama-server that compresses it sends it in
    chunks) is read too: the SDK reads a failed response's whole body itself once it stops
    retrying, so reading it here first costs nothing more."""
    if response.status_code < 500 or "json" not in response.headers.get("content-type", ""):
        return
    length = response.headers.get("content-length")
    if length is not None and (not length.isdigit() or int(length) > _ERROR_BODY_MAX):
        return
    await response.aread()
    with contextlib.suppress(ValueError):
        body = response.json()
        if overflow_of(body, "") is not None or _set_up_error(body):
            response.headers["x-should-retry"] = "false"
