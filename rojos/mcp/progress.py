"""Progress a server reports during a tool call, handed on to whoever shows the call.

A call carries a progressToken (the SDK's `progress_callback`), and each
`notifications/progress` for it comes here: its text bounded (the message is the server's,
untrusted), and throttled so that a chatty server cannot flood the turn's stream or its log,
at most one report per call every PROGRESS_SECONDS, the last one always handed on before
the call's result. Who is told is bound to the turn's task (`progress_in_task`), as a
server's questions are (`questions`); outside a turn (a script, a conformance run) nobody is.
"""

import asyncio
import math
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass

PROGRESS_SECONDS = 0.25  # at most four reports a second per call reach the stream
MESSAGE_CHARS = 200  # the server's message, cut: a line of the page, not a document


@dataclass(frozen=True, kw_only=True)
class Progress:
    """How far call `call` has come, as its server said: `total` and `message` if it gave them."""

    call: str
    progress: float
    total: float | None = None
    message: str | None = None


Reporter = Callable[[Progress], None]
# What a connection calls with each notification of a call: progress, total, message.
OnProgress = Callable[[float, float | None, str | None], None]

_reporter: ContextVar[Reporter | None] = ContextVar("mcp_progress_reporter", default=None)


def progress_in_task(reporter: Reporter) -> None:
    """Progress of calls in the rest of this task goes to `reporter` (a turn's task)."""
    _reporter.set(reporter)


def progress_reporter() -> Reporter | None:
    """Where progress of a call made in this context goes, or None."""
    return _reporter.get()


def message_bounded(message: str | None) -> str | None:
    """The server's message on one line, cut at MESSAGE_CHARS; None when it says nothing."""
    if message is None:
        return None
    text = " ".join(message.split())
    if len(text) > MESSAGE_CHARS:
        text = text[: MESSAGE_CHARS - 1] + "…"
    return text or None


def _number(value: float | None) -> float | None:
    """A finite number, as JSON can carry it (a server may send anything the SDK takes)."""
    if value is None or not math.isfinite(value):
        return None
    return int(value) if value == int(value) else value


class CallProgress:
    """The progress of one call: each report throttled, the last one kept until `close`."""

    def __init__(self, call: str, reporter: Reporter, *, seconds: float = PROGRESS_SECONDS) -> None:
        self.call = call
        self._reporter = reporter
        self._seconds = seconds
        self._loop = asyncio.get_running_loop()
        self._sent_at = -math.inf
        self._held: Progress | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._closed = False

    def report(self, progress: float, total: float | None, message: str | None) -> None:
        """A notification came: hand it on now, or hold it until the interval is over."""
        amount = _number(progress)
        if self._closed or amount is None:
            return
        self._held = Progress(
            call=self.call, progress=amount, total=_number(total), message=message_bounded(message)
        )
        wait = self._sent_at + self._seconds - self._loop.time()
        if wait <= 0:
            self._send()
        elif self._timer is None:
            self._timer = self._loop.call_later(wait, self._send)

    def _send(self) -> None:
        self._timer = None
        held, self._held = self._held, None
        if held is None or self._closed:
            return
        self._sent_at = self._loop.time()
        self._reporter(held)

    def close(self) -> None:
        """The call ended: hand on what is held (before its result), then nothing more."""
        if self._timer is not None:
            self._timer.cancel()
        self._send()
        self._closed = True
