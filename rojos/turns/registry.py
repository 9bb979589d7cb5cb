"""This process's turns by conversation: the running ones and, a while after, the finished.

A re-attaching client finds its conversation's turn here (rojos.turns.reattach), a Stop its
running one (rojos.turns.control), a shutdown all of them (rojos.turns.shutdown).
"""

import asyncio

from rojos.turns.log import Turn

# How long a finished turn's events stay available to re-attaching clients.
KEEP_FINISHED_SECONDS = 120

_turns: dict[int, Turn] = {}  # this process's running and recently finished turns
_starting: set[asyncio.Future] = set()  # starts past the draining check, not yet turns


def turn_get(conversation_id: int) -> Turn | None:
    """The running or recently finished turn of a conversation in this process."""
    return _turns.get(conversation_id)


def turns_running() -> list[Turn]:
    """This process's turns whose task runs."""
    return [turn for turn in _turns.values() if turn.task is not None and not turn.finished]


def turn_starting(start: asyncio.Future) -> None:
    """Count a start under way until it ends (a turn registered, or refused): a shutdown
    that began meanwhile must wait for the turn it becomes, which its list of running
    turns, read before, lacks."""
    _starting.add(start)
    start.add_done_callback(_starting.discard)


def turns_starting() -> list[asyncio.Future]:
    """This process's starts under way (past the draining check, not yet turns)."""
    return list(_starting)


def turn_register(turn: Turn) -> None:
    """Make the turn the one re-attaching clients of its conversation follow."""
    _turns[turn.conversation_id] = turn


def turn_forget_later(turn: Turn) -> None:
    """Drop a finished turn's log once re-attaching clients no longer need it."""
    asyncio.get_running_loop().call_later(KEEP_FINISHED_SECONDS, _forget, turn)


def _forget(turn: Turn) -> None:
    if _turns.get(turn.conversation_id) is turn:
        del _turns[turn.conversation_id]
