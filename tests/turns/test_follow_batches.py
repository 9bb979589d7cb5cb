"""A follower gets the events published together in one batch, each with its own number.

The chat stream writes a batch at once (one send through Django and the server instead of
one per event); the numbers a client re-attaches from (Last-Event-ID) stay those of the
events, and a batch is never held back for more: it comes in the loop iteration after the
events were published.
"""

import asyncio

import pytest

from rojos.agent.events import ChatEvent, DoneEvent, StartEvent, ToolCallEvent
from rojos.turns.log import Turn


async def _next(batches):
    return await asyncio.wait_for(anext(batches), 1)


async def test_events_published_together_come_in_one_batch_numbered_one_by_one():
    turn = Turn(conversation_id=1)
    batches = turn.follow_batches()
    turn.publish(StartEvent(conversation=1, message=1))
    turn.publish(ChatEvent(text="Hel"))
    turn.publish(ChatEvent(text="lo"))
    first = await _next(batches)
    assert [(e.seq, e.type, e.data) for e in first] == [
        (1, "START", {"conversation": 1, "message": 1}),
        (2, "CHAT", {"text": "Hel"}),
        (3, "CHAT", {"text": "lo"}),
    ]
    waiting = asyncio.ensure_future(_next(batches))
    await asyncio.sleep(0)
    assert not waiting.done()  # nothing new: the follower waits, it is not handed []
    turn.publish(ToolCallEvent(id="c1", name="list_files", args={}, index=0, of=1))
    turn.publish(DoneEvent())
    turn.finish()
    second = await waiting
    assert [(e.seq, e.type) for e in second] == [(4, "TOOL_CALL"), (5, "DONE")]
    assert await anext(batches, None) is None


async def test_events_published_while_the_follower_writes_come_before_the_end():
    """The turn may finish while a batch is being written: what came meanwhile still goes."""
    turn = Turn(conversation_id=1)
    turn.publish(ChatEvent(text="a"))
    batches = turn.follow_batches()
    assert [e.seq for e in await _next(batches)] == [1]
    turn.publish(ChatEvent(text="b"))
    turn.publish(DoneEvent())
    turn.finish()
    assert [(e.seq, e.data) for e in await _next(batches)] == [(2, {"text": "b"}), (3, {})]
    assert await anext(batches, None) is None


async def test_a_follower_re_attaching_mid_turn_gets_what_it_missed_in_one_batch():
    turn = Turn(conversation_id=1)
    for text in ("a", "b", "c", "d"):
        turn.publish(ChatEvent(text=text))
    batch = await _next(turn.follow_batches(after=2))
    assert [(e.seq, e.data["text"]) for e in batch] == [(3, "c"), (4, "d")]


async def test_a_waiter_wakes_at_the_next_event_and_at_once_once_the_turn_is_finished():
    turn = Turn(conversation_id=1)
    waiting = asyncio.ensure_future(turn.changed())
    await asyncio.sleep(0)
    assert not waiting.done()

    turn.publish(ChatEvent(text="Hi"))
    await asyncio.wait_for(waiting, 1)
    turn.finish()
    await asyncio.wait_for(turn.changed(), 1)


async def test_a_wait_given_up_is_not_kept_until_the_next_event():
    """A relay pings its follower when nothing came for a while (wait_for's timeout): a
    turn waiting an hour for an approval must not collect a waiter per ping."""
    turn = Turn(conversation_id=1)
    for _ in range(3):
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(turn.changed(), 0.01)
    assert turn._waiting == []
    follower = turn.follow_batches()
    turn.publish(ChatEvent(text="still there"))
    assert [e.data for e in await _next(follower)] == [{"text": "still there"}]


async def test_a_direct_follower_is_written_to_by_the_turn_and_woken_only_when_that_fails():
    """With `direct`, what is published while the follower has all goes to direct() in the
    publishing task: the chunks of a read together at flush(), any other event at once. The
    follower's task sleeps on; its numbering goes on from what direct() took."""
    turn = Turn(conversation_id=1)
    written, room = [], [True]

    def direct(batch):
        if room[0]:
            written.append([(event.seq, event.type, event.data) for event in batch])
        return room[0]

    turn.publish(StartEvent(conversation=1, message=1))
    batches = turn.follow_batches(direct=direct)
    assert [e.seq for e in await _next(batches)] == [1]
    waiting = asyncio.ensure_future(anext(batches))
    await asyncio.sleep(0)
    turn.publish(ChatEvent(text="Hel"))
    turn.publish(ChatEvent(text="lo"))
    assert written == []  # a read's chunks wait for the read to end
    turn.flush()
    assert written == [[(2, "CHAT", {"text": "Hel"}), (3, "CHAT", {"text": "lo"})]]
    turn.flush()  # nothing new: nothing written
    turn.publish(ToolCallEvent(id="c1", name="list_files", args={}, index=0, of=1))
    assert [(seq, kind) for seq, kind, _ in written[-1]] == [(4, "TOOL_CALL")]  # at once
    await asyncio.sleep(0)
    assert not waiting.done()  # written for it: never woken
    room[0] = False  # the client reads slowly now: the follower writes these itself
    turn.publish(ChatEvent(text="!"))
    turn.flush()
    assert [(e.seq, e.type) for e in await asyncio.wait_for(waiting, 1)] == [(5, "CHAT")]
    room[0] = True
    waiting = asyncio.ensure_future(anext(batches))
    await asyncio.sleep(0)
    turn.publish(DoneEvent())
    turn.finish()
    with pytest.raises(StopAsyncIteration):  # it had all: the end, nothing more to send
        await asyncio.wait_for(waiting, 1)
    assert written[-1] == [(6, "DONE", {})]


async def test_a_direct_follower_that_goes_away_is_never_written_to_again():
    turn = Turn(conversation_id=1)
    written = []
    batches = turn.follow_batches(direct=lambda batch: written.append(batch) or True)
    waiting = asyncio.ensure_future(anext(batches))
    await asyncio.sleep(0)
    waiting.cancel()  # the client left: its response's task is cancelled
    with pytest.raises(asyncio.CancelledError):
        await waiting
    turn.publish(ChatEvent(text="after"))
    turn.flush()
    turn.publish(DoneEvent())
    assert written == []
