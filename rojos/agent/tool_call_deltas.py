"""TOOL_CALL_DELTA events: what the page shows of a tool call while the model still writes it.

A call's arguments can take minutes to stream (a model writing a big file); without these the
page would show nothing until they end. Deltas are throttled per call by the clock, not per
chunk: a call is announced once it has been forming for ROJO_TOOL_DELTA_SECONDS, then updated
at most that often, so a 1 MB argument in 100,000 chunks makes a few hundred events at most,
and a call that streams in faster than that (most do) makes none. The agent loop asks after
every network read, and after every quiet spell of that length (the provider's `tick`), so
what arrived is shown within one interval even when the provider then pauses. A forming
update_plan call also carries the steps whose text has arrived, so the checklist follows it.
"""

import time
from dataclasses import dataclass, field

from django.conf import settings

from rojos.agent.events import ToolCallDeltaEvent
from rojos.context.plan import TOOL_NAME as PLAN_TOOL
from rojos.provider.accumulator import StreamAccumulator
from rojos.provider.partial_arguments import ArgumentScanner

_PATH_KEYS = ("path", "source")


@dataclass(slots=True)
class _Forming:
    """What has been shown of one call: how far its fragments were read, and when."""

    first_seen: float
    scanner: ArgumentScanner = field(default_factory=ArgumentScanner)
    read: int = 0  # fragments of the call's arguments fed to the scanner
    shown_at: float | None = None
    shown: tuple = ()  # (id, name, chars, path) of the last delta


class ToolCallDeltas:
    """The deltas due for the calls of one response, given its accumulator."""

    def __init__(self, accumulator: StreamAccumulator) -> None:
        self.accumulator = accumulator
        self.forming: list[_Forming] = []

    @staticmethod
    def interval() -> float:
        return float(settings.ROJO_TOOL_DELTA_SECONDS)

    def quiet_spell(self) -> float | None:
        """How long the provider may be quiet before the loop looks at the forming calls
        again (the provider's `tick`); None before any call forms: no deltas to show, so
        the read needs no timer (one per chunk was ~3% of a text stream's CPU)."""
        return self.interval() if self.accumulator.calls else None

    def due(self, now: float | None = None) -> list[ToolCallDeltaEvent]:
        """Deltas for the calls with news whose interval has passed."""
        calls = self.accumulator.calls
        if not calls:
            return []
        now = time.monotonic() if now is None else now
        interval = self.interval()
        while len(self.forming) < len(calls):
            self.forming.append(_Forming(first_seen=now))
        events = []
        for index, (call, forming) in enumerate(zip(calls, self.forming, strict=True)):
            since = forming.first_seen if forming.shown_at is None else forming.shown_at
            if not call.name or now - since < interval:
                continue
            event = self._delta(index, call, forming)
            if event is not None:
                forming.shown_at = now
                events.append(event)
        return events

    def _delta(self, index: int, call, forming: _Forming) -> ToolCallDeltaEvent | None:
        fragments = call.arguments
        for fragment in fragments[forming.read :]:
            forming.scanner.feed(fragment)
        forming.read = len(fragments)
        scanner = forming.scanner
        text = scanner.take_text()
        path = next((scanner.names[k] for k in _PATH_KEYS if k in scanner.names), None)
        shown = (call.id or "", call.name, scanner.chars, path)
        if shown == forming.shown and not text:
            return None
        forming.shown = shown
        steps = scanner.items.get("plan", []) if call.name == PLAN_TOOL else None
        return ToolCallDeltaEvent(
            index=index, id=shown[0], name=call.name, chars=scanner.chars, path=path, text=text,
            steps=[dict(item) for item in steps] if steps is not None else None,
        )  # fmt: skip

    def final_ids(self, tool_calls: list[dict]) -> list[ToolCallDeltaEvent]:
        """After the response: one more delta for each shown call whose id changed (a
        provider's missing or repeated id is replaced), so the page can match its TOOL_CALL."""
        events = []
        for index, (call, forming) in enumerate(zip(tool_calls, self.forming, strict=False)):
            if forming.shown and forming.shown[0] != call["id"]:
                _, name, chars, path = forming.shown
                final = ToolCallDeltaEvent(
                    index=index, id=call["id"], name=name, chars=chars, path=path
                )
                events.append(final)
        return events
