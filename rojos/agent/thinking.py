"""The model's thinking as it streams: REASONING events, and how long it thought.

The accumulator collects the reasoning of all three shapes (PROVIDERS.md, "Reasoning");
this turns what it gained since the last look into one event, so a read of many chunks
gives one event, not one per chunk, and nothing here touches the database. How long the
model thought (its first reasoning to its first answer text or call) is kept with the
reply, so a reopened conversation says so as the live one did. A reply whose thinking
turns out to have been its answer (the accumulator gives the reasoning back as text) takes
back what was sent of it, and stores no seconds.
"""

import time

from rojos.agent.events import ReasoningEvent
from rojos.provider.accumulator import StreamAccumulator


class Thinking:
    """What one response's accumulator gained of reasoning, as events; and its duration."""

    __slots__ = ("accumulator", "began", "ended", "seen")

    def __init__(self, accumulator: StreamAccumulator) -> None:
        self.accumulator = accumulator
        self.seen = 0  # reasoning parts already sent
        self.began: float | None = None
        self.ended: float | None = None

    def due(self) -> ReasoningEvent | None:
        """The reasoning since the last event, or None (the common case: a length check)."""
        parts = self.accumulator.reasoning_parts
        if len(parts) == self.seen:
            return None
        if len(parts) < self.seen:  # given back as the answer: it was not thinking
            self.seen, self.began = len(parts), None
            return ReasoningEvent(text="", retracted=True)
        text = "".join(parts[self.seen :])
        if self.began is None and text.isspace():
            return None  # white space alone (an empty think block) is no thinking, yet
        self.seen = len(parts)
        if self.began is None:
            self.began = time.monotonic()
        return ReasoningEvent(text=text) if text else None

    def answered(self) -> ReasoningEvent | None:
        """The answer (text or a call) has begun: the thinking before it is over; the last
        of it, if any came in the same read, to send before the answer."""
        event = self.due()
        if self.ended is None:
            self.ended = time.monotonic()
        return event

    def extra(self) -> dict:
        """What to store with the reply: how long it thought, in seconds (none: nothing)."""
        if self.began is None:
            return {}
        ended = self.ended
        if ended is None or ended < self.began:  # it thought on after the answer began
            ended = time.monotonic()
        return {"reasoning_seconds": round(ended - self.began, 1)}
