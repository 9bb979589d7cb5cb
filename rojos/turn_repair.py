"""Repairing a conversation whose last turn a crash cut off, when its next turn starts.

The stored history is made whole where the turn died: calls left open are answered as
interrupted (History.load_blocking), the turn's record says it was interrupted, change
records the crash left unfinished are finished, and what cut-off writes left next to their
targets is removed. Nothing else ever needs repair: every turn that ends, however it ends,
records that and answers its calls itself.
"""

from dataclasses import dataclass, field
from pathlib import Path

from django.utils import timezone

from roject import storage

from . import undo
from .history import History
from .models import Conversation, FileChange, TurnRecord
from .tool_calls import cut_off_writes_clean
from .tools import registry

INTERRUPTED_MESSAGE = (
    "The server stopped while this reply was running; it ends here, "
    "and calls it had not finished are marked interrupted."
)


@dataclass
class Repair:
    """What a crash left of a conversation's last turn, found while its history loaded."""

    project_id: int
    root: Path
    # Calls the crash cut off (answered as interrupted now), and their unfinished records.
    cut_off: list[dict] = field(default_factory=list)
    unfinished: list[FileChange] = field(default_factory=list)

    @property
    def needed(self) -> bool:
        return bool(self.cut_off or self.unfinished)

    async def files_repair(self) -> None:
        """Finish the change records and clean up after cut-off writes, under the project's
        change lock (every write to a project runs under it)."""

        def repair() -> None:
            undo.cut_off_changes_finish(self.root, self.unfinished)
            cut_off_writes_clean(self.root, self.cut_off, registry)

        await storage.under_changes_lock(self.project_id, repair)


def conversation_repair(
    *, conversation: Conversation, history: History, root: Path, taken_over: bool
) -> Repair:
    """(Blocking, in the transaction that starts the next turn) Record the cut-off turn as
    interrupted and find what its files need; `taken_over`: the claim was a dead turn's.

    Its error is what the chat, replay and export show where the turn ended.
    """
    repair = Repair(project_id=conversation.project_id, root=root, cut_off=history.cut_off)
    if not (taken_over or history.cut_off):
        return repair
    TurnRecord.objects.filter(conversation=conversation, status__in=TurnRecord.UNFINISHED).update(
        status=TurnRecord.Status.INTERRUPTED,
        error=INTERRUPTED_MESSAGE,
        error_code="interrupted",
        finished=timezone.now(),
    )
    # Change records a crash left unfinished, with its calls (see ToolCallRunner._execute).
    repair.unfinished = list(
        FileChange.objects.filter(conversation=conversation, after__isnull=True)
    )
    return repair
