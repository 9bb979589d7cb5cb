"""One self-test's requests: sent through the rojo's own client and stream reader, bounded.

Every request goes to the rojo's base URL through `rojo_client` (the key goes nowhere
else, and every message is scrubbed of it by the stream reader), with no retries. The test
is bounded on our side, because the providers disagree on the options that would bound it
(OpenAI's reasoning models refuse `max_tokens`, Mistral `max_completion_tokens`): at most
`requests` requests, each read for at most `seconds_each` seconds and `answer_chars`
characters or `chunks` chunks before the stream is closed, all within `seconds_total`.

A response that came to its finish reason is whole, as a turn reads it, whatever follows:
an error, a reset, or a provider that keeps the connection open. Past its finish reason,
the rest of it (the usage chunk, [DONE]) is waited for at most `seconds_after_finish`, so
that a provider hanging after every answer is tested within the total all the same.
"""

import asyncio
from dataclasses import dataclass, field

import openai

from rojos.errors import ProviderError
from rojos.models.capabilities import CLOSING_THINK_TAG
from rojos.provider.accumulator import StreamAccumulator
from rojos.provider.completion import Completion
from rojos.provider.failures import rojo_fixes
from rojos.provider.stream import provider_chunks
from rojos.selftest.asks import base_request


@dataclass(frozen=True, kw_only=True, slots=True)
class Limits:
    """How far one self-test may go."""

    requests: int = 12
    seconds_each: float = 30.0
    seconds_total: float = 120.0
    answer_chars: int = 4_000
    chunks: int = 1_200  # reasoning streams many chunks before its first text
    seconds_after_finish: float = 5.0  # the usage chunk and [DONE] come right after, if at all


# What a response that finished and then neither ended nor sent more is noted with.
_KEPT_OPEN = (
    "The provider kept the connection open after its response finished: no usage chunk, "
    "[DONE] or end of the body came (a chat waits ROJO_PROVIDER_TIMEOUT for them, then "
    "keeps the answer)."
)


@dataclass(kw_only=True, slots=True)
class Exchange:
    """What one request brought back: a finished response, or the failure that ended it."""

    completion: Completion | None = None
    error: ProviderError | None = None
    status: int | None = None  # the HTTP status of a refused request
    shapes: set[str] = field(default_factory=set)  # how its parts came (see _scan)
    cut: bool = False  # closed at the limits, unfinished
    # A failure after the response's finish reason: the response stands, as in a chat.
    late_error: ProviderError | None = None

    @property
    def refused(self) -> bool:
        """The provider refused the request itself (a 4xx): what it was asked, it does not do."""
        return (
            self.status is not None
            and 400 <= self.status < 500
            and self.status
            not in (
                401,
                403,
                408,
                429,
            )
        )


def _status(exc: BaseException) -> int | None:
    """The HTTP status behind a ProviderError (the stream reader raises it from the SDK's)."""
    seen = 0
    cause = exc.__context__
    while cause is not None and seen < 5:
        if isinstance(cause, openai.APIStatusError):
            return cause.status_code
        cause, seen = cause.__context__, seen + 1
    return None


def _scan(chunk: dict, shapes: set[str]) -> None:
    """Note the shapes a chunk's parts come in: the reasoning's field, typed parts, usage."""
    choices = chunk.get("choices")
    if chunk.get("usage") and not choices:
        shapes.add("usage-only chunk")
    elif chunk.get("usage"):
        shapes.add("usage in a choice's chunk")
    for choice in choices or ():
        delta = (choice.get("delta") if isinstance(choice, dict) else None) or {}
        for key in ("reasoning_content", "reasoning"):
            if isinstance(delta.get(key), str) and delta[key]:
                shapes.add(key)
        content = delta.get("content")
        if isinstance(content, list) and any(
            isinstance(p, dict) and p.get("type") == "thinking" for p in content
        ):
            shapes.add("thinking parts")
        for call in delta.get("tool_calls") or ():
            if isinstance(call, dict) and "index" not in call:
                shapes.add("calls without index")


class Session:
    """The requests of one self-test of `model`, counted and timed against its limits."""

    def __init__(self, client: openai.AsyncOpenAI, limits: Limits, *, rojo, model: str) -> None:
        self.client = client.with_options(max_retries=0)
        self.limits = limits
        self.rojo = rojo
        self.model = model
        self.refused: set[str] = set()  # options the provider refused, left out from then on
        self.sent = 0
        self.loop = asyncio.get_running_loop()
        self.deadline = self.loop.time() + limits.seconds_total
        self.memo: dict[str, object] = {}  # what one probe found for the next (a reply)

    def request(self, messages: list[dict], **extra) -> dict:
        """A request of this test: as a turn would send it, with `extra`."""
        request = base_request(self.rojo, self.model, messages, refused=frozenset(self.refused))
        return {**request, **extra}

    def left(self) -> float:
        return self.deadline - self.loop.time()

    async def ask(self, request: dict) -> Exchange:
        """Send one streamed request and read its answer within the limits."""
        if self.sent >= self.limits.requests or self.left() <= 0:
            return Exchange(error=ProviderError("The self-test's limits were reached first."))
        self.sent += 1
        seconds = min(self.limits.seconds_each, self.left())
        exchange = Exchange()
        accumulator = StreamAccumulator()
        kept_open = None
        try:
            # As a turn reads it: a failure after the finish reason leaves the response whole.
            async with asyncio.timeout(seconds) as deadline, accumulator.whole_if_broken():
                await self._read(request, accumulator, exchange, deadline)
        except ProviderError as exc:
            exchange.error, exchange.status = exc, _status(exc)
            return exchange
        except TimeoutError:
            if not accumulator.finished:
                exchange.error = ProviderError(f"No whole answer within {seconds:g} seconds.")
                return exchange
            kept_open = ProviderError(_KEPT_OPEN)
        # An accumulator that splits `<think>` tags from the text names the shape it read.
        shape = getattr(accumulator, "reasoning_shape", None)
        if "<think>" in accumulator.text or shape == "think":
            exchange.shapes.add("think tags")
        elif "</think>" in accumulator.text:  # the opening tag was in the prompt
            exchange.shapes.add(CLOSING_THINK_TAG)
        exchange.late_error = accumulator.late_error or kept_open
        if not exchange.cut:
            try:
                exchange.completion = accumulator.result()
            except ProviderError as exc:
                exchange.error = exc
        return exchange

    async def _read(
        self,
        request: dict,
        accumulator: StreamAccumulator,
        exchange: Exchange,
        deadline: asyncio.Timeout,
    ):
        chars = chunks = 0
        stream = provider_chunks(self.client, request, fixes=rojo_fixes(self.rojo))
        finished = False
        try:
            async for batch in stream:
                for chunk in batch:
                    _scan(chunk, exchange.shapes)
                    chars += len(accumulator.feed(chunk))
                    chunks += 1
                if not finished and accumulator.finished:  # only its usage and end to come
                    finished = True
                    after = self.loop.time() + self.limits.seconds_after_finish
                    deadline.reschedule(min(deadline.when(), after))
                if chars > self.limits.answer_chars or chunks > self.limits.chunks:
                    exchange.cut = True
                    exchange.error = ProviderError(
                        "The answer went on past the self-test's limit and was cut off."
                    )
                    return
        finally:
            await stream.aclose()
