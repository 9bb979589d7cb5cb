"""The turn runner: a turn runs as a server-side task that outlives the request that started it.

rojos.turns.start claims the conversation and stores the user's message; the task then runs
the agent loop and publishes every event to the turn's log (rojos.turns.log), from which
clients follow it, in this process or through the relay (rojos.turns.relay). How it ended is
recorded, and the conversation given up, in one more transaction.
"""

import asyncio
import contextlib
import functools
import logging
import time

from django.conf import settings

from roject.server.db_threads import db_context
from roject.server.log_format import log_context
from rojos import metrics
from rojos.agent.events import DoneEvent, ToolProgressEvent
from rojos.agent.history import History
from rojos.agent.loop import agent_loop
from rojos.db import DB_DOWN, unreachable
from rojos.errors import TurnError
from rojos.mcp.progress import Progress, progress_in_task
from rojos.mcp.questions import questions_in_task
from rojos.models import Rojo, TurnRecord
from rojos.provider.admission import start_slot_use
from rojos.provider.clients import rojo_client
from rojos.turns.admission import StartSlot, starts_settled
from rojos.turns.approval_waits import approval_wait
from rojos.turns.claims import turn_beat_start
from rojos.turns.log import Turn
from rojos.turns.memory_trim import memory_trimmed
from rojos.turns.questions import TurnAsker
from rojos.turns.registry import turn_forget_later, turn_get
from rojos.turns.relay import LAYER_ERRORS, turn_group, turn_listen
from rojos.turns.repair import INTERRUPTED_MESSAGE
from rojos.turns.writeback import turn_end
from rojos.whole import whole

__all__ = ["INTERRUPTED_MESSAGE", "Turn", "turn_get", "turn_run"]

logger = logging.getLogger(__name__)

_CLAIM_LOST = (
    "This reply was stopped: its server could not confirm it was still running for too long, "
    "and the conversation was given to a new message."
)


async def turn_run(turn: Turn, *, admission: StartSlot | None = None, **kwargs) -> None:
    """Run the turn with its ORM calls in a lane of their own on the database threads.

    Its own: a turn whose database call waits (SQLite busy, a lock) holds up no other turn.
    `admission`, the start's place among the starts under way, is given back when its
    first provider request leaves (rojos.turns.admission), or at the latest when the task
    is done (turn_start's done callback).
    """
    turn.begun = True
    log_context(conversation_id=turn.conversation_id)  # its lines in the log say whose
    start_slot_use(admission)
    metrics.turns_started.inc()
    metrics.turns_running.inc()
    try:
        with memory_trimmed():  # what its start and its end free goes back to the system
            async with db_context():
                await _run(turn, **kwargs)
    finally:
        metrics.turns_running.dec()
        metrics.turns_ended.labels(outcome=str(turn.status)).inc()


async def _run(
    turn: Turn,
    *,
    turn_id,
    history: History,
    rojo: Rojo,
    ctx,
    tools,
    layer,
    channel,
    budgets,
    model=None,
) -> None:
    conversation_id = turn.conversation_id
    task = asyncio.current_task()
    listener = asyncio.create_task(turn_listen(layer, channel, turn, task))
    deadline = turn.deadline = asyncio.timeout(settings.ROJO_TURN_MAX_SECONDS)
    if getattr(ctx.user, "pk", None) is not None:
        questions_in_task(TurnAsker(turn, ctx.user))  # servers' questions go to the turn's user
    progress_in_task(functools.partial(_progress_publish, turn))  # servers' progress reports
    # Beaten with the process's other turns, in a lane of their own: a beat waiting on a
    # database out of reach does not hold up the turn's own writes. No task of the turn's
    # own for that (a task waiting to be cancelled, about 1 KiB of every stream).
    beat_stop = turn_beat_start(turn, turn_id, task)
    try:
        if turn.stop_asked:  # stopped before its task first ran
            raise asyncio.CancelledError
        async with (
            deadline,
            contextlib.aclosing(
                agent_loop(
                    history=history,
                    rojo=rojo,
                    ctx=ctx,
                    client=await rojo_client(rojo),
                    tools=tools,
                    approver=functools.partial(approval_wait, turn),
                    record_changes=True,
                    budgets=budgets,
                    role_read=True,  # turn_start's `access`, read as the turn started
                    model=model,
                    idle=turn.flush,  # a read's chunks to the followers in one write
                    writes_wait=starts_settled,  # the starts waiting go first
                )
            ) as events,
        ):
            started = time.monotonic()
            first = True
            async for event in events:
                if first:  # the time to the first event: a test an event
                    first = False
                    metrics.first_event_seconds.observe(time.monotonic() - started)
                turn.publish(event)
    except TimeoutError:
        await _publish_interrupted(turn, history)
        if not deadline.expired():  # not the turn's limit: a failure like any other
            logger.exception("turn in conversation %s failed", conversation_id)
            turn.fail("The turn failed on the server; see its log.", "internal")
        else:
            minutes = settings.ROJO_TURN_MAX_SECONDS / 60
            turn.fail(
                f"The reply ran past its limit of {minutes:g} minutes (ROJO_TURN_MAX_SECONDS) "
                "and was stopped; reply to let it go on.",
                "timeout",
            )
    except TurnError as exc:
        await _publish_interrupted(turn, history)
        turn.fail(str(exc), exc.code)
    except asyncio.CancelledError:
        await _publish_interrupted(turn, history)
        if turn.claim_lost:
            turn.fail(_CLAIM_LOST, "internal")
        elif turn.interrupted:  # its process shuts down (rojos.turns.shutdown)
            turn.fail(INTERRUPTED_MESSAGE, "interrupted", TurnRecord.Status.INTERRUPTED)
        else:
            turn.fail("Stopped.", "stopped", TurnRecord.Status.STOPPED)
    except DB_DOWN:  # a read the turn does not retry (its writes are: rojos.turns.writeback)
        logger.warning("turn in conversation %s: the database failed", conversation_id)
        await _publish_interrupted(turn, history)
        error = unreachable(retried=False)
        turn.fail(str(error), error.code)
    except Exception:
        logger.exception("turn in conversation %s failed", conversation_id)
        await _publish_interrupted(turn, history)
        turn.fail("The turn failed on the server; see its log.", "internal")
    finally:
        listener.cancel()
        beat_stop()  # before the end gives the claim up: a beat then would stop the turn
        await _cleanup(turn, turn_id=turn_id, history=history, layer=layer, channel=channel)


def _progress_publish(turn: Turn, progress: Progress) -> None:
    """A call's progress on the turn's stream (its log keeps the call's latest for a
    re-attaching page)."""
    if turn.finished:  # a report held past the turn's end
        return
    event = ToolProgressEvent(
        id=progress.call, progress=progress.progress, total=progress.total, message=progress.message
    )
    turn.publish(event)


async def _publish_interrupted(turn: Turn, history: History) -> None:
    """Answer the calls the end of the turn cut short, and tell the browser how they were.

    A stop or failure can land between a call's result being stored and its event being
    sent, before a call ran at all, or while the reply asking for the calls was being
    stored (answered as interrupted here): the stored history decides.
    """
    if not turn.claim_lost:  # else the conversation is another turn's, which answered them
        with contextlib.suppress(Exception):  # the database may be what failed
            await whole(history.close_open_calls())
    turn.publish_unsent(history.messages)


async def _cleanup(turn: Turn, *, turn_id, history: History, layer, channel) -> None:
    conversation_id = turn.conversation_id
    try:
        await turn_end(turn, turn_id, history)
    finally:
        with contextlib.suppress(*LAYER_ERRORS):  # the relay may be down; the end is recorded
            await layer.group_discard(turn_group(conversation_id), channel)
        turn.publish(DoneEvent())
        turn.finish()
        turn_forget_later(turn)
