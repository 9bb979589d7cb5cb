"""A turn's event log: its numbered events, kept in memory while it runs and a while after.

A client that loses its connection re-attaches and gets what it missed from here (in this
process; another process relays them, see rojos.turns.relay). The log also holds what the
running turn waits for: people's decisions on its calls (rojos.turns.approval_waits) and
their answers to servers' questions (rojos.turns.questions).
"""

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable

from rojos.agent.events import (
    ChatEvent,
    ErrorEvent,
    ReasoningEvent,
    ToolCallEvent,
    TurnEvent,
    WireEvent,
    event_data,
)
from rojos.agent.stored_events import message_events
from rojos.models import Message, TurnRecord
from rojos.turns.events import TurnEvents


class Turn:
    """The numbered events of one turn, and a way to follow them as they come."""

    def __init__(self, conversation_id: int) -> None:
        self.conversation_id = conversation_id
        # The events, numbered; a run of CHAT chunks is kept as one buffer (turn_events).
        # Neither it nor the wire data of the others adds per-chunk objects for the garbage
        # collector to track. events.at(seq) gives one event back, events.after(seq) what a
        # follower gets next.
        self.events = TurnEvents()
        self.finished = False
        self.task: asyncio.Task | None = None
        self.record_id: int | None = None
        # The turn's name on the wire: its user message's id, as its START says (`message`).
        self.message_id: int | None = None
        self.error: dict = {}
        self.approvals: dict[str, asyncio.Future] = {}
        # Servers' questions waiting for the person's answer (rojos.turns.questions).
        self.questions: dict = {}
        self.relays: set[asyncio.Task] = set()
        self.auto_approve: bool | None = None
        # The turn's time limit, once it runs: routed approvals stop it while they wait.
        self.deadline: asyncio.Timeout | None = None
        self.status = TurnRecord.Status.DONE
        self.claim_lost = False
        self.begun = False  # its task has started running (turns.turn_run)
        self.stop_asked = False  # a Stop came before it had
        self.interrupted = False  # its process shuts down (rojos.turns.shutdown)
        # Followers waiting for the next event: a future each, woken by publish (an Event
        # made anew for every chunk cost more than the follower's write of it).
        self._waiting: list[asyncio.Future] = []
        # Followers waiting that the turn's task writes to itself while they wait
        # (follow_batches' `direct`), woken only when it cannot; and whether chunks were
        # published since it last did (flush() writes them).
        self._direct: list[_Direct] = []
        self._unwritten = False

    def stop(self) -> None:
        """Stop the turn: cancel its task, or, before the task first ran (a task cancelled
        then never runs, not even its cleanup), have it stop as it begins."""
        if self.begun:
            self.task.cancel()
        else:
            self.stop_asked = True

    def interrupt(self) -> None:
        """End the turn as its process shuts down: as a Stop does, recorded as interrupted."""
        self.interrupted = True
        self.stop()

    def publish(self, event: TurnEvent) -> None:
        chunk = True
        if type(event) is ChatEvent:
            self.events.append("CHAT", event.text)
        elif type(event) is ReasoningEvent and not (event.whole or event.retracted):
            self.events.append("REASONING", event.text)  # a run, as CHAT chunks are
        else:
            self.events.append(event.type, event_data(event))
            chunk = False
        if self._waiting:  # (not a call of _wake for every chunk)
            waiting, self._waiting = self._waiting, []
            for future in waiting:
                if not future.done():
                    future.set_result(None)
        if self._direct:
            if chunk:
                self._unwritten = True  # a read's chunks go out together, at flush()
            else:
                self._write_direct()

    def flush(self) -> None:
        """Write the chunks published since the last write to the direct followers: the
        turn's task is about to wait (for the provider's next bytes, or its stream ended).
        Every other event is written as it is published."""
        if self._unwritten:
            self._write_direct()

    def _write_direct(self) -> None:
        """Hand each direct follower what it has not had, as one batch; one whose write
        could not take it is woken to send it itself."""
        self._unwritten = False
        kept = []
        for follower in self._direct:
            if follower.waiting.done():  # cancelled: its response is going away
                continue
            batch = self._batch_after(follower.seq)
            if follower.write(batch):
                follower.seq = batch[-1].seq
                kept.append(follower)
            else:
                follower.waiting.set_result(None)
        self._direct = kept

    def _wake(self) -> None:
        waiting, self._waiting = self._waiting, []
        for future in waiting:
            if not future.done():  # a follower that gave up waiting (wait_for's timeout)
                future.set_result(None)
        direct, self._direct = self._direct, []
        for follower in direct:
            if not follower.waiting.done():
                follower.waiting.set_result(None)

    @property
    def seq(self) -> int:
        """The number of the last event published (and how many there are)."""
        return self.events.seq

    def event(self, position: int) -> WireEvent:
        """The event at a position (0-based) of the log, a CHAT chunk on its own."""
        return self.events.at(position + 1)

    def fail(self, message: str, code: str, status=TurnRecord.Status.ERROR) -> None:
        """Publish the ERROR event that ends the turn, and remember it for the record."""
        self.status = status
        self.error = {"message": message, "code": code}
        self.publish(ErrorEvent(message=message, code=code))

    def publish_unsent(self, messages: list[Message]) -> None:
        """Publish the calls and results of this turn that are stored but were never sent.

        A stop or failure can land between a call's result being stored and its event being
        sent, or before a call ran at all (it was then answered as interrupted): the stored
        history decides what the browser is told.
        """
        sent = list(self.events.others())
        results = {data["id"] for kind, data in sent if kind == "TOOL_RESULT"}
        announced = {data["id"] for kind, data in sent if kind == "TOOL_CALL"}
        started = sent[0][1]["message"]
        since = [m for m in messages if m.pk is None or m.pk > started]
        for message, event in message_events(since):
            if message.role != Message.Role.TOOL or message.tool_call_id in results:
                continue  # text was streamed as it came; results sent are not sent again
            if event.type in ("QUESTION", "ANSWERED"):
                continue  # published live, as they came
            if isinstance(event, ToolCallEvent) and message.tool_call_id in announced:
                continue
            self.publish(event)

    def finish(self) -> None:
        self.finished = True
        self._wake()

    async def changed(self) -> None:
        """Wait for the next event (or the end; at once once the turn is finished)."""
        if self.finished:
            return
        future = asyncio.get_running_loop().create_future()
        self._waiting.append(future)
        try:
            await future
        except asyncio.CancelledError:  # a relay's wait_for that timed out: not kept until
            with contextlib.suppress(ValueError):  # the next event (an hour's approval wait)
                self._waiting.remove(future)
            raise

    async def follow(self, after: int = 0) -> AsyncIterator[WireEvent]:
        """Events numbered above `after`, then each new one until the turn is done."""
        async for batch in self.follow_batches(after):
            for event in batch:
                yield event

    async def follow_batches(
        self, after: int = 0, *, direct: Callable[[list[WireEvent]], bool] | None = None
    ) -> AsyncIterator[list[WireEvent]]:
        """Events numbered above `after`, then the new ones until the turn is done: each
        time, all those published by then, in order (the chat stream writes them at once).

        With `direct`, while the follower has all and waits, the turn's own task hands
        what is new to direct(batch) (a chunk at flush(), any other event as it is
        published), and the follower goes on waiting; it is woken (and gets the batch here)
        when direct returns False. A chunk then costs no wake-up of the follower's task
        (roject/server/direct_writes.py).

        What the follower missed of a run of CHAT chunks comes in events of about 64 KiB
        (each numbered as its last chunk: TurnEvents.after). An `after` this turn never gave
        (an id from an earlier turn, kept by a tab that lost its connection) starts from the
        beginning: else the stream would end with nothing, not even DONE, and the client
        would ask again at once.
        """
        position = max(after, 0)
        if position > self.events.seq:
            position = 0
        events = self.events
        loop = asyncio.get_running_loop()
        while True:
            if position >= events.seq:  # all sent; more may have come while the last batch was
                if self.finished:
                    return
                waiting = loop.create_future()  # as changed() waits, without its coroutine
                if direct is None:
                    self._waiting.append(waiting)
                    await waiting
                    continue
                follower = _Direct(waiting, direct, position)
                self._direct.append(follower)
                try:
                    await waiting
                finally:
                    position = follower.seq  # what direct() took is sent
                    with contextlib.suppress(ValueError):
                        self._direct.remove(follower)
                continue
            batch = self._batch_after(position)
            position = batch[-1].seq
            yield batch

    def _batch_after(self, position: int) -> list[WireEvent]:
        """The events after `position` (below the last), as a follower gets them next."""
        events = self.events
        event = events.after(position)
        batch = [event]
        while event.seq < events.seq:
            event = events.after(event.seq)
            batch.append(event)
        return batch


class _Direct:
    """A follower waiting while publish writes to it: its wake-up, its write, its place."""

    __slots__ = ("seq", "waiting", "write")

    def __init__(
        self, waiting: asyncio.Future, write: Callable[[list[WireEvent]], bool], seq: int
    ) -> None:
        self.waiting, self.write, self.seq = waiting, write, seq
