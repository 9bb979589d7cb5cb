"""Repairing a conversation whose last turn a crash cut off: as soon as any process finds
its claim dead (dead_turn_end: a re-attach, a Stop, a read, a restart), or when its next
turn starts.

The stored history is made whole where the turn died: calls left open are answered as
interrupted (History.load_blocking), the turn's record says it was interrupted, the text it
kept is no longer a draft (so search finds it) and what the response that wrote it used is
recorded (an estimate: the provider bills it, budgets count it), change records the crash
left unfinished are finished, and what cut-off writes left next to their targets is removed.
Nothing else ever needs repair: every turn that ends, however it ends, records that and
answers its calls itself.
"""

from dataclasses import dataclass, field
from pathlib import Path

from asgiref.sync import sync_to_async
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from roject import storage
from rojos.agent.changing_calls import cut_off_writes_clean
from rojos.agent.history import History
from rojos.agent.usage_accounts import cut_off_account_blocking
from rojos.approvals.live import approvals_changed_publish
from rojos.changes import undo
from rojos.models import Conversation, FileChange, Message, PendingApproval, TurnRecord
from rojos.models.claims import dead_claim
from rojos.tools import registry

# What followers of a dead turn are told, and what its record says.
INTERRUPTED_MESSAGE = "The server running this reply stopped; what it had written is kept."


@dataclass
class Repair:
    """What a crash left of a conversation's last turn, found while its history loaded."""

    project_id: int
    root: Path
    # Calls the crash cut off (answered as interrupted now), and their unfinished records.
    cut_off: list[dict] = field(default_factory=list)
    unfinished: list[FileChange] = field(default_factory=list)
    # Whether calls of the dead turn that waited for an owner were dropped from the inbox.
    approvals_dropped: bool = False

    @property
    def needed(self) -> bool:
        return bool(self.cut_off or self.unfinished or self.approvals_dropped)

    async def complete(self) -> None:
        """After the repair's transaction: the files, and the owners' news.

        The change records are finished and what cut-off writes left is cleaned up, under
        the project's change lock (every write to a project runs under it); the records are
        read again there: a change made since may have finished them first, as they really
        were. Owners whose inbox lost the dead turn's calls are told, as when a call is
        decided (rojos.approvals.pending.pending_approval_remove): else their pages' count
        stays stale until their next check."""

        def repair() -> None:
            undo.cut_off_changes_finish(project_id=self.project_id, root=self.root)
            cut_off_writes_clean(self.root, self.cut_off, registry)

        if self.cut_off or self.unfinished:
            await storage.under_changes_lock(self.project_id, repair)
        if self.approvals_dropped:
            await approvals_changed_publish(project_id=self.project_id)


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
    if taken_over:  # the dead turn's waits end with it (its claim's approval_waiting did)
        waits = PendingApproval.objects.filter(conversation=conversation)
        repair.approvals_dropped = bool(waits.filter(routed=True).delete()[0])
        waits.delete()
    running = TurnRecord.objects.filter(
        conversation=conversation, status=TurnRecord.Status.RUNNING
    ).select_related("rojo", "user")
    record = running.last()
    running.update(
        status=TurnRecord.Status.INTERRUPTED,
        error=INTERRUPTED_MESSAGE,
        error_code="interrupted",
        finished=timezone.now(),
    )
    _drafts_keep(conversation, history, record)
    # Change records a crash left unfinished, with its calls (see CallExecutor._execute).
    repair.unfinished = list(
        FileChange.objects.filter(conversation=conversation, after__isnull=True)
    )
    return repair


def _drafts_keep(conversation: Conversation, history: History, record: TurnRecord | None) -> None:
    """(Blocking) The turn's last draft is what it wrote: kept, so indexed from now on; and
    the response that wrote it is counted, once: only by the repair that took its marker
    off (the claim's conditional UPDATE already lets one repair through, and this holds even
    when a draft outlived its turn's record)."""
    for index, message in enumerate(history.messages):
        if not message.draft:
            continue
        if not Message.objects.filter(pk=message.pk, draft=True).update(draft=False):
            continue
        message.draft = False
        if record is not None:
            cut_off_account_blocking(
                conversation=conversation,
                record=record,
                reply=message,
                before=history.messages[:index],
            )
    # Drafts off the active branch (switched while the turn ran) are kept all the same.
    Message.objects.filter(conversation=conversation, draft=True).update(draft=False)


def _dead_turn_end_blocking(conversation: Conversation, claim: Q) -> Repair | None:
    """(Blocking) Give a dead claim up and record its turn as interrupted, answering its open
    calls: one transaction. None when the claim was not (or no longer) that dead one. The
    wait for an approval it left ends with it, as a taken-over claim's does
    (conversation_repair drops its stored calls): else the next turn would read as waiting,
    and the owners' inbox offer the dead call again."""
    with transaction.atomic():
        rows = Conversation.objects.filter(claim, pk=conversation.pk)
        ended = {"turn_id": None, "turn_heartbeat": None, "turn_owner": ""}
        if not rows.update(**ended, approval_waiting=None):
            return None
        conversation.approval_waiting = None
        history = History.load_blocking(conversation)
        return conversation_repair(
            conversation=conversation,
            history=history,
            root=storage.project_root(conversation.project_id),
            taken_over=True,
        )


async def dead_turn_end(conversation: Conversation, *, silent: Q | None = None) -> bool:
    """End the conversation's turn as interrupted if its claim is dead; whether it did.
    `silent`: a filter that tells the claim is dead when it still matches (a heartbeat that
    did not move through a wait spanning two beats).

    What the turn had written is kept: its text was saved as it streamed (drafts.Draft),
    its finished calls are stored; the calls it left open are answered as interrupted, and
    the files its cut-off calls touched are repaired, as at the next message.
    """
    claim = dead_claim(conversation)
    if claim is None and silent is not None and conversation.turn_id is not None:
        claim = Q(turn_id=conversation.turn_id) & silent
    if claim is None:
        return False
    repair = await sync_to_async(_dead_turn_end_blocking)(conversation, claim)
    if repair is None:
        return False
    if repair.needed:
        await repair.complete()
    conversation.turn_id = conversation.turn_heartbeat = None
    conversation.turn_owner = ""
    return True
