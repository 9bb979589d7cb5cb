"""A turn start's place given back as its first provider request leaves.

A start holds a place among the starts under way (rojos.turns.admission) until its work on
this process is done: the turn's task hands its place to its context here, and the provider
gives it back as the request leaves, knowing nothing of turns.
"""

import contextvars
from typing import Protocol


class Slot(Protocol):
    """A place among the starts under way (rojos.turns.admission.StartSlot)."""

    def release(self) -> None: ...


_slot: contextvars.ContextVar[Slot | None] = contextvars.ContextVar("start_slot", default=None)


def start_slot_use(slot: Slot | None) -> None:
    """The running task's start holds `slot` (set by the turn's task, whose context is its own)."""
    _slot.set(slot)


def admitted() -> None:
    """The start is as far as it goes on this process: its provider request leaves now."""
    slot = _slot.get()
    if slot is not None:
        slot.release()
