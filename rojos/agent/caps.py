"""Caps on one turn's work: tool calls per model response and per turn, and the bytes tool
results may return to the model (runaway cost, and a turn streaming a project's files out).

Past a cap a call is answered with an error the model can act on, not run; every call is
still answered, so the history stays valid. The caps are settings (0 turns one off), read
at each call.
"""

from dataclasses import dataclass

from django.conf import settings

from rojos.agent.history import tool_content
from rojos.tools import ToolOutcome


@dataclass
class TurnCaps:
    """What one turn has used so far: the calls that ran, the bytes their results returned."""

    calls: int = 0
    read_bytes: int = 0

    def call_refusal(self, index: int) -> ToolOutcome | None:
        """Count the `index`-th call (from 0) of a response as run, or refuse it."""
        per_response = settings.ROJO_MAX_CALLS_PER_RESPONSE
        if per_response and index >= per_response:
            return ToolOutcome.failure(
                f"not run: only the first {per_response} tool calls of one response run "
                "(ROJO_MAX_CALLS_PER_RESPONSE); make this call again in your next response, "
                "with fewer calls at a time"
            )
        per_turn = settings.ROJO_MAX_CALLS_PER_TURN
        if per_turn and self.calls >= per_turn:
            return ToolOutcome.failure(
                f"not run: this reply has made the {per_turn} tool calls one reply may make "
                "(ROJO_MAX_CALLS_PER_TURN); answer with what you have and say what is left "
                "to do: the user can reply to let you go on"
            )
        self.calls += 1
        return None

    def charged(self, outcome: ToolOutcome, *, changed: bool) -> ToolOutcome:
        """Count the outcome's result against the read budget; a result that would pass it
        is refused instead, unless its call may have changed files (that is always told)."""
        budget = settings.ROJO_TURN_READ_BYTES
        size = len(tool_content(outcome.result).encode())
        left = max(budget - self.read_bytes, 0)
        if budget and size > left and not changed:
            return ToolOutcome.failure(_over_budget(size, left, budget))
        self.read_bytes += size
        return outcome


def _over_budget(size: int, left: int, budget: int) -> str:
    if not left:
        return (
            f"not returned: this reply has used its read budget of {budget:,} bytes "
            "(ROJO_TURN_READ_BYTES); answer with what you have: the user can reply to let "
            "you read more"
        )
    return (
        f"not returned: the result is {size:,} bytes, more than the {left:,} bytes left of "
        f"this reply's read budget of {budget:,} (ROJO_TURN_READ_BYTES); read less at a "
        "time: get_text_content with offset and limit, list_files with offset, a narrower "
        "search_text, read_result with a smaller length"
    )
