"""Whether a tool call waits for a person's approval, and the wait itself.

A call asks when its tool is an MCP tool not marked read-only by a trusted server, or one of the
rojo's Ask-before tools that would change an existing path (unless nothing would change);
never when a person allowed the tool for the rest of the conversation, unless the call is
routed: with the project's "changes need approval by an owner" on, a call in a non-owner's
turn waits for an owner (rojos/approvals/pending.py), allowed tools or not. Each wait is
stored while it lasts.
"""

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

from django.utils import timezone

from roject import storage
from roject.storage import StorageError
from rojos.agent.allowed_tools import conversation_tool_allow
from rojos.agent.events import AgentEvent, ApprovalRequiredEvent, ToolResultEvent
from rojos.agent.history import History
from rojos.approvals.pending import (
    approval_audit,
    approval_routed,
    pending_approval_add,
    pending_approval_remove,
)
from rojos.models import Conversation, PendingApproval
from rojos.tools import (
    RojoTool,
    RojoToolContext,
    RojoToolRegistry,
    ToolCall,
    ToolError,
    ToolOutcome,
)
from rojos.whole import whole

DENIED_OUTCOME = ToolOutcome.failure("denied by the user")
DENIED = DENIED_OUTCOME.result

# An approval that also allows the call's tool for the rest of the conversation ("approve +
# allow for this conversation"). The gate stores the allow once this decision reached the turn,
# before the call runs: its turn's next calls see it, and a decision that came too late (the
# call decided already) allows nothing.
APPROVED_AND_ALLOWED: Literal["allow"] = "allow"

# Waits for a person's decision on a call id: True (or APPROVED_AND_ALLOWED) to run the call,
# False denied, None no decision in time (a denial by the system). Called with routed=True for
# a call that waits for an owner (only in a person's turn:
# rojos.turns.approval_waits.approval_wait).
Decision = bool | Literal["allow"] | None
Approver = Callable[..., Awaitable[Decision]]


def _exists_any(ctx: RojoToolContext, paths: list[str]) -> bool:
    """Whether any of the paths is there; one that is not allowed names nothing."""
    for relative in paths:
        with contextlib.suppress(StorageError):
            if storage.entry_exists(ctx.project_root, relative):
                return True
    return False


def _preview(tool: RojoTool, args: dict, ctx: RojoToolContext) -> dict:
    try:
        return tool.preview(args, ctx)
    except (ToolError, StorageError, OSError) as exc:
        return {"error": str(exc)}


def _changes_something(preview: dict) -> bool:
    """False for a write or an edit whose diff is empty: it would leave the file as it is,
    so it runs without asking."""
    return preview.get("diff") != ""


@dataclass(kw_only=True)
class ApprovalGate:
    """Asks for approval of the calls of one turn that need it, through `approver`.

    `approver` None runs every call without asking (scripts, re-runs on scratch copies).
    """

    tools: RojoToolRegistry
    history: History
    approval_tools: frozenset[str] = frozenset()
    approver: Approver | None = None

    def _asks_always(self, tool: RojoTool | None, parsed: ToolCall, ctx) -> bool:
        """Whether the call waits for approval whatever it touches (an MCP tool the server
        does not mark read-only, or that no admin trusts), when someone can give it."""
        return (
            self.approver is not None
            and tool is not None
            and tool.needs_approval
            and parsed.args is not None
            and tool in self.tools.available(ctx)
        )

    async def _question(self, parsed: ToolCall, changing, ctx) -> tuple[dict, dict] | None:
        """The arguments and preview to ask about, or None when the call runs unasked."""
        tool = self.tools.get(parsed.name)
        if self._asks_always(tool, parsed, ctx):
            return parsed.args, tool.preview(parsed.args, ctx)
        if not changing or self.approver is None or parsed.name not in self.approval_tools:
            return None
        tool, args = changing
        if not await asyncio.to_thread(_exists_any, ctx, tool.changed_paths(args)):
            return None
        preview = await asyncio.to_thread(_preview, tool, args, ctx)
        return (args, preview) if _changes_something(preview) else None

    async def ask(
        self, parsed: ToolCall, changing, ctx: RojoToolContext
    ) -> AsyncIterator[AgentEvent]:
        """Ask for approval if the call needs it. Yields the question, then the denial's
        result if denied (the caller stores it; the call must then not run)."""
        question = await self._question(parsed, changing, ctx)
        if question is None:
            return
        routed = await approval_routed(project_id=ctx.project_id, user=ctx.user)
        # A routed call waits for an owner whatever the conversation allows: "allow for
        # this conversation" is a member's own choice, not an owner's.
        if not routed and await self._allowed(parsed.name):
            return
        args, preview = question
        pending = await self._pending_add(parsed, changing, ctx, preview, routed)
        # Marked before the question goes out, so that a decision sent at once finds the
        # approver already waiting (nothing awaits between the two).
        waiting = self._waiting()
        await waiting.aupdate(approval_waiting=timezone.now())
        try:
            yield ApprovalRequiredEvent(
                id=parsed.id, name=parsed.name, args=args, preview=preview, routed=routed
            )
            ask = functools.partial(self.approver, routed=True) if routed else self.approver
            approved = await ask(parsed.id)
        finally:
            await whole(self._waited(waiting, pending))
        if approved == APPROVED_AND_ALLOWED:
            await conversation_tool_allow(conversation=self.history.conversation, tool=parsed.name)
        if approved is None and pending is not None:  # no decision in time: the system's
            conversation = self.history.conversation
            await approval_audit(
                user=None,
                conversation=conversation,
                pending=pending,
                approved=False,
                timed_out=True,
            )
        if not approved:
            yield ToolResultEvent(id=parsed.id, name=parsed.name, result=DENIED, ok=False)

    async def _pending_add(
        self, parsed: ToolCall, changing, ctx: RojoToolContext, preview: dict, routed: bool
    ) -> PendingApproval | None:
        """Store the wait (none for a conversation that is not stored: a scratch re-run)."""
        if self.history.conversation.pk is None:
            return None
        paths = changing[0].changed_paths(changing[1]) if changing else []
        return await pending_approval_add(
            conversation=self.history.conversation,
            user=ctx.user,
            call_id=parsed.id,
            tool=parsed.name,
            path=", ".join(paths),
            preview=preview,
            routed=routed,
        )

    async def _waited(self, waiting, pending: PendingApproval | None) -> None:
        """The wait is over: the badge and the stored wait go."""
        await waiting.aupdate(approval_waiting=None)
        if pending is not None:
            await pending_approval_remove(pending=pending)

    async def _allowed(self, name: str) -> bool:
        """Whether a person allowed this tool for the rest of the conversation (read now:
        the choice may have been made on an earlier call of this very turn)."""
        conversation = self.history.conversation
        if conversation.pk is None:
            return False
        rows = Conversation.objects.filter(pk=conversation.pk)
        allowed = await rows.values_list("allowed_tools", flat=True).afirst()
        return name in (allowed or ())

    def _waiting(self):
        """The conversation's row, marked while a call waits for a person's decision (the
        list's badge, on every process)."""
        return Conversation.objects.filter(pk=self.history.conversation.pk)
