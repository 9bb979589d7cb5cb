"""One MCP call, run as a turn of the token's MCP conversation in the project.

Each (token, project) has one conversation, titled "via MCP (<token name>)", whose turns
are the calls: a user message naming the call, an assistant message holding it, and the
tool message with its result, as the chat stores a rojo's calls. So the call goes through
the chat's own path (rojos.agent.tool_calls.ToolCallRunner: the role read again, the turn's caps,
the change lock, the undo record stored with the result), its turn record counts in the
user's limits (rojos.turns.limits), and the page shows its activity line and Undo. What it
stores, and checks first, is ./call_turns.py.

The token and the user's membership are checked again as each call starts. Calls of one
conversation take turns, as a conversation's turns do: a call waits for the one before it,
in line behind this process's earlier calls (first come, first served), and only the first
in line asks the database whether the conversation is free (a call of another process may
hold it): waiting calls that each asked twenty times a second took the database from the
running one, and sixty calls sent at once ran out their wait refused.
Nothing is paused for approval: the outside agent's client asks its own user (docs/mcp.md).
With the project's "changes need approval by an owner" on, a non-owner's call that would
change what is there is refused instead (./owner_approval.py): nobody could approve it.
"""

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import anyio
from asgiref.sync import sync_to_async

from roject.server.db_threads import db_context
from rojos.agent.events import ToolResultEvent
from rojos.agent.history import tool_content
from rojos.agent.tool_calls import ToolCallRunner
from rojos.turns.claims import turn_heartbeat
from rojos.whole import whole

from ..errors import AccessRevoked
from ..tools import ToolCall, echoed, registry
from .call_line import call_line
from .call_turns import BegunCall, CallRefused, call_begin_blocking, call_end_blocking
from .caller import McpCaller

logger = logging.getLogger(__name__)

# How long a call waits for the call before it in the same conversation to finish.
CALL_WAIT_SECONDS = 30
_BUSY = "another call with this token is still running in this project; try again"


@dataclass(frozen=True, slots=True)
class McpResult:
    """A finished (or refused) call: what the client reads and where it was kept."""

    ok: bool
    value: Any
    text: str
    conversation_id: int | None = None
    change_id: int | None = None

    @classmethod
    def refused(cls, message: str, conversation_id: int | None = None) -> "McpResult":
        return cls(False, {"error": message}, message, conversation_id)


async def _begun(
    caller: McpCaller, name: str, arguments: dict, deadline: float
) -> BegunCall | McpResult:
    while True:
        begin = asyncio.ensure_future(sync_to_async(call_begin_blocking)(caller, name, arguments))
        try:
            begun = await asyncio.shield(begin)
        except CallRefused as exc:
            return McpResult.refused(str(exc))
        except asyncio.CancelledError:  # a begin under way ends, then the turn it began
            with contextlib.suppress(CallRefused):
                if (late := await begin) is not None:
                    await sync_to_async(call_end_blocking)(late, stopped=True)
            raise
        if begun is not None:
            return begun
        if time.monotonic() > deadline:
            return McpResult.refused(_BUSY)
        await asyncio.sleep(0.05)


async def _run(begun: BegunCall) -> McpResult:
    """Run the stored call through the chat's tool-call runner; its result is stored."""
    runner = ToolCallRunner(
        ctx=begun.ctx, tools=registry, history=begun.history, address=begun.address
    )
    done: ToolResultEvent | None = None
    try:
        async for event in runner.run(begun.call, ToolCall.of(begun.call), begun.assistant.pk):
            if isinstance(event, ToolResultEvent):
                done = event
    except AccessRevoked:  # removed from the project as the call started: answered, not run
        pass
    if done is None:
        return McpResult.refused("You are not a member of this project.", begun.conversation.pk)
    text = tool_content(done.result) if done.ok else done.result["error"]
    return McpResult(done.ok, done.result, text, begun.conversation.pk, done.change)


async def _call(caller: McpCaller, name: str, arguments: dict) -> McpResult:
    deadline = time.monotonic() + CALL_WAIT_SECONDS
    async with db_context(), call_line(caller, deadline) as turn_came:
        if not turn_came:
            return McpResult.refused(_BUSY)
        begun = await _begun(caller, name, arguments, deadline)
        if isinstance(begun, McpResult):
            return begun
        claim = SimpleNamespace(conversation_id=begun.conversation.pk, claim_lost=False)
        beat = asyncio.create_task(turn_heartbeat(claim, begun.turn_id, asyncio.current_task()))
        stopped = False
        try:
            if begun.repair.needed:  # the last call was cut off by a crash
                await whole(begun.repair.complete())
            return await _run(begun)
        except asyncio.CancelledError:
            # A claim taken over (the heartbeat's cancel): its calls are the new turn's.
            stopped = not claim.claim_lost
            raise
        finally:
            beat.cancel()
            await whole(sync_to_async(call_end_blocking)(begun, stopped=stopped))


async def mcp_call(*, caller: McpCaller, name: str, arguments: dict | None) -> McpResult:
    """Run one MCP call; never raises for what the client did: refusals are results.

    Cancelled (its client went away: ./disconnects.py), a call that waits for its turn
    never runs; one that runs ends as a stopped turn: a tool already started finishes and
    its result, change record and audit entry are kept, as when a chat's turn is stopped;
    a call not yet started is answered as interrupted. The call runs in a task of its own,
    cancelled once: the SDK's cancel scope cancels again at every await, which would cut
    that ending short.
    """
    call = asyncio.ensure_future(_call(caller, name, arguments or {}))
    try:
        return await asyncio.shield(call)
    except asyncio.CancelledError:
        if call.done():  # the call's own end (its claim taken over), not its client's
            raise
        logger.info(
            "MCP call %r of token %s cancelled before its answer", echoed(name), caller.token_id
        )
        call.cancel()
        with anyio.CancelScope(shield=True), contextlib.suppress(asyncio.CancelledError):
            await call  # its end, stored; then the cancellation goes on
        raise
