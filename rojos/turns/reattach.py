"""Which turn answers a re-attach: only the conversation's current one, and an `after` only
if it counts that turn's events.

A process keeps a finished turn's log KEEP_FINISHED_SECONDS (rojos.turns.registry), and the
conversation may have started its next turn meanwhile, in another process. An `after`
counts the events of one turn: answered from another turn's log, a client was shown the tail
of the previous reply as this one's, and followers of a killed turn the previous reply as if
complete (issue #31). So a re-attach is answered from a log only if that log is the
conversation's newest turn; and a client names the turn it followed (`turn`: the `message`
of that turn's START), so that one which followed an earlier turn gets the current one from
its START (numbered 1: the whole turn again), never a tail counted in another turn.
"""

from dataclasses import dataclass

from rojos.models import TurnRecord
from rojos.turns.log import Turn
from rojos.turns.registry import turn_get


@dataclass(frozen=True, slots=True)
class Reattach:
    """How to answer a re-attach: this process's log of the current turn, if it has it;
    the position to go on from in the current turn (0: its START); and that turn's name."""

    local: Turn | None
    after: int
    current: int | None


async def turn_current_message(conversation_id: int) -> int | None:
    """The name of the conversation's newest turn (its user message's id); None if none.

    One turn runs at a time in a conversation (its claim), so the newest record is the
    running turn's, or the last one's once it ended.
    """
    newest = TurnRecord.objects.filter(conversation_id=conversation_id).order_by("-pk")
    return await newest.values_list("user_message_id", flat=True).afirst()


async def turn_reattach_plan(*, conversation_id: int, after: int, turn: int | None) -> Reattach:
    """What answers a re-attach after event `after` of the turn named `turn` (None: a client
    that names none, whose `after` is taken as counted in the current turn)."""
    current = await turn_current_message(conversation_id)
    if turn is not None and turn != current:
        after = 0  # it followed an earlier turn: the current one, whole
    local = turn_get(conversation_id)
    if local is not None and (current is None or local.message_id != current):
        local = None  # an earlier turn's log, kept here: never an answer
    return Reattach(local=local, after=after, current=current)
