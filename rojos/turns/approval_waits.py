"""A turn's calls waiting for a person's decision: the wait, in the turn's own task, and the
decision handed to it, from whichever request or relay brought it (rojos.turns.control).

The waits are kept on the turn's log (`Turn.approvals`), as its servers' questions are
(rojos.turns.questions).
"""

import asyncio
import contextlib
from collections.abc import Iterator

from django.conf import settings

from rojos import metrics
from rojos.agent.approval_gate import APPROVED_AND_ALLOWED, Decision


def approval_deliver(turn, call_id: str, *, approve: bool, allow_tool: bool = False) -> bool:
    """Hand a person's decision to `turn`'s call waiting for it; False when none waits (it
    was decided already, or it is not one of this turn's calls). With `allow_tool`, an
    approval also allows the call's tool for the rest of the conversation (stored by the
    turn)."""
    waiting = turn.approvals.get(call_id)
    if waiting is None or waiting.done():
        return False
    waiting.set_result(APPROVED_AND_ALLOWED if approve and allow_tool else approve)
    return True


async def approval_wait(turn, call_id: str, *, routed: bool = False) -> Decision:
    """Wait for a person's decision on a call of `turn`; None when none came in time (a
    denial).

    A call `routed` to the project's owners waits ROJO_OWNER_APPROVAL_TIMEOUT, and the
    turn's own time limit stands still meanwhile: an owner may take an hour.
    """
    if turn.auto_approve is not None:
        return turn.auto_approve
    waiting = asyncio.get_running_loop().create_future()
    turn.approvals[call_id] = waiting
    metrics.approvals_waiting.inc()
    timeout = settings.ROJO_OWNER_APPROVAL_TIMEOUT if routed else settings.ROJO_APPROVAL_TIMEOUT
    try:
        with _deadline_paused(turn) if routed else contextlib.nullcontext():
            return await asyncio.wait_for(waiting, timeout)
    except TimeoutError:
        return None
    finally:
        turn.approvals.pop(call_id, None)
        metrics.approvals_waiting.dec()


@contextlib.contextmanager
def _deadline_paused(turn) -> Iterator[None]:
    """Stop the turn's time limit (ROJO_TURN_MAX_SECONDS) for the block, then move it on by
    as long as the block took."""
    deadline = turn.deadline
    when = deadline.when() if deadline is not None else None
    if when is None:
        yield
        return
    loop = asyncio.get_running_loop()
    started = loop.time()
    deadline.reschedule(None)
    try:
        yield
    finally:
        if not deadline.expired():
            deadline.reschedule(when + loop.time() - started)
