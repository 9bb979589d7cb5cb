"""Running one tool call: the user's access and the turn's caps first, then approval where
needed (rojos/agent/approval_gate.py), and recording what it changed (the run and its stored
result: rojos/agent/call_execution.py)."""

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace

from roject import storage
from roject.identity.live_auth import asession_signed_in
from roject.identity.tokens import aapi_token_alive
from roject.members.access import aproject_role
from roject.models import Role
from rojos.agent.access_ended import (
    REMOVED_MESSAGE,
    REMOVED_OUTCOME,
    REVOKED_OUTCOME,
    SESSION_ENDED_MESSAGE,
    SESSION_ENDED_OUTCOME,
    TOKEN_ENDED_MESSAGE,
    TOKEN_ENDED_OUTCOME,
)
from rojos.agent.approval_gate import DENIED_OUTCOME, ApprovalGate, Approver
from rojos.agent.call_execution import CallExecutor
from rojos.agent.changing_calls import changing_call
from rojos.agent.events import AgentEvent, ToolResultEvent
from rojos.errors import AccessRevoked
from rojos.tools import RojoTool, RojoToolContext, ToolCall, ToolOutcome
from rojos.whole import whole


@dataclass(kw_only=True)
class ToolCallRunner(CallExecutor):
    """Runs the calls of a turn with its rules: who approves, and whether changes are kept.

    `approver` None runs every call without asking (scripts, re-runs on scratch copies);
    `record_changes` False keeps no undo records (a scratch copy has nothing to undo).

    The user's role is read again before each model step and each call (one query each; the
    turn's API token or login session too): a user removed from the project, or whose token
    was revoked or session ended, ends the turn (AccessRevoked); one who may no longer
    write gets only read tools from then on, as a viewer's turn would. A role that grows
    while the turn runs does not widen it. Scripts and re-runs (no user) keep their role.
    """

    approval_tools: frozenset[str] = frozenset()
    approver: Approver | None = None
    role_read: bool = False  # ctx.role was read just now: the first step_check keeps it

    def __post_init__(self) -> None:
        super().__post_init__()
        self.gate = ApprovalGate(
            tools=self.tools,
            history=self.history,
            approval_tools=self.approval_tools,
            approver=self.approver,
        )
        self._granted = Role(self.ctx.role)  # the role the turn started with
        self._ended = (REMOVED_OUTCOME, REMOVED_MESSAGE)  # why its user may do nothing more

    async def _role_now(self) -> Role | None:
        """The user's role now, narrowing the context to it when it may no longer write;
        None for one removed, or whose turn's API token was revoked or has expired, or
        whose login session has ended."""
        if self.ctx.user is None:
            return self._granted
        if self.ctx.token_id is not None and not await aapi_token_alive(token_id=self.ctx.token_id):
            self._ended = (TOKEN_ENDED_OUTCOME, TOKEN_ENDED_MESSAGE)
            return None
        role = await aproject_role(user=self.ctx.user, project_id=self.ctx.project_id)
        if role is not None and not await self._session_signed_in():
            self._ended = (SESSION_ENDED_OUTCOME, SESSION_ENDED_MESSAGE)
            return None
        if role is not None and self.ctx.can_write and not role.can_write:
            self.ctx = replace(self.ctx, role=role)
        return role

    async def _session_signed_in(self) -> bool:
        """Whether the login session the turn was asked in (if any) is still signed in."""
        key = self.ctx.session_key
        return key is None or await asession_signed_in(session_key=key, user_id=self.ctx.user.pk)

    async def step_check(self) -> RojoToolContext:
        """Before a model step: the context to offer tools for; AccessRevoked for a user
        no longer a member."""
        if self.ctx.conversation_id is not None and not self.ctx.results_kept:
            kept = await asyncio.to_thread(
                storage.results_kept,
                project_id=self.ctx.project_id,
                conversation_id=self.ctx.conversation_id,
            )
            self.ctx = replace(self.ctx, results_kept=kept)
        if self.role_read:
            self.role_read = False
            return self.ctx
        if await self._role_now() is None:
            raise AccessRevoked(self._ended[1])
        return self.ctx

    async def _refusal(self, name: str, index: int) -> tuple[ToolOutcome | None, bool]:
        """Why a call must not run, if it must not (past a cap, or no longer allowed), and
        whether its user was removed from the project."""
        capped = self.caps.call_refusal(index)
        if capped is not None:
            return capped, False
        return await self._role_refusal(name)

    async def _role_refusal(self, name: str) -> tuple[ToolOutcome | None, bool]:
        """Why the user may not make this call now, if not, and whether they were removed."""
        role = await self._role_now()
        tool = self.tools.get(name)
        writes = tool is not None and tool.writes and self._granted.can_write
        # A removed user's write keeps the refusal of a write; an ended token or session
        # says so, not that the user was removed or made a viewer.
        if role is None and not (writes and self._ended[0] is REMOVED_OUTCOME):
            return self._ended[0], True
        if writes and (role is None or not role.can_write):
            return REVOKED_OUTCOME, role is None
        return None, False

    def _changing_tool(self, call: ToolCall) -> tuple[RojoTool, dict] | None:
        """The tool and valid arguments of a call that may change files, else None."""
        changing = changing_call(self.tools, call)
        if changing is None or changing[0] not in self.tools.available(self.ctx):
            return None
        return changing

    async def run(
        self, call: dict, parsed: ToolCall, message_id: int | None, *, index: int = 0
    ) -> AsyncIterator[AgentEvent]:
        """Run one call of the stored reply `call` (`parsed`: the same, arguments parsed),
        the `index`-th of its response.

        A call past the turn's caps, or that its user may no longer make, is answered with
        an error and not run; after a user's removal the turn ends (AccessRevoked).
        """
        call_id, name = parsed.id, parsed.name
        refusal, removed = await self._refusal(name, index)
        if refusal is not None:
            async for event in self._refused(call, parsed, refusal, removed=removed):
                yield event
            return
        changing = self._changing_tool(parsed)
        denied = asked = False
        asking = self.gate.ask(parsed, changing, self.ctx)
        async with contextlib.aclosing(asking):
            async for event in asking:
                asked = True
                if denied := isinstance(event, ToolResultEvent):
                    await self._store(call, DENIED_OUTCOME)
                yield event
        if denied:
            return
        if asked:  # the wait may have been long: the user's role, read again
            refusal, removed = await self._role_refusal(name)
            if refusal is not None:
                async for event in self._refused(call, parsed, refusal, removed=removed):
                    yield event
                return
        tool = self.tools.get(name)
        if tool is not None and not tool.undoable:
            # An MCP call is a request to another server: a stop cancels it (the SDK tells
            # the server), and the call is answered as interrupted.
            outcome, change = await self._execute(call, parsed, None, message_id)
        else:
            # A call that started finishes, even when the turn is stopped meanwhile: its
            # thread would change the files anyway, so its real result and undo record
            # are kept.
            outcome, change = await whole(self._execute(call, parsed, changing, message_id))
        yield ToolResultEvent(
            id=call_id,
            name=name,
            result=outcome.result,
            ok=outcome.ok,
            change=change,
            mcp_server=tool.mcp_server if tool is not None else None,
        )

    async def _refused(
        self, call: dict, parsed: ToolCall, refusal: ToolOutcome, *, removed: bool
    ) -> AsyncIterator[AgentEvent]:
        """Store and announce a call that is not run; after a user's removal the turn ends."""
        await self._store(call, refusal)
        yield ToolResultEvent(id=parsed.id, name=parsed.name, result=refusal.result, ok=False)
        if removed:
            raise AccessRevoked(self._ended[1])
