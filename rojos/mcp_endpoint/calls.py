"""One MCP call, run as a turn of the token's MCP conversation in the project.

Each (token, project) has one conversation, titled "via MCP (<token name>)", whose turns
are the calls: a user message naming the call, an assistant message holding it, and the
tool message with its result, as the chat stores a rojo's calls. So the call goes through
the chat's own path (rojos.agent.tool_calls.ToolCallRunner: the role read again, the turn's caps,
the change lock, the undo record stored with the result), its turn record counts in the
user's limits (rojos.turns.limits), and the page shows its activity line and Undo.

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
import json
import logging
import time
import uuid
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import anyio
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from roject import storage
from roject.identity.tokens import api_token_live
from roject.members.access import project_role
from roject.models import ApiToken, Role
from roject.server.db_threads import db_context
from rojos.agent.events import ToolResultEvent
from rojos.agent.history import History, tool_content
from rojos.agent.tool_calls import ToolCallRunner
from rojos.turns.claims import turn_claim_blocking, turn_heartbeat, turn_release_blocking
from rojos.turns.limits import turn_limits_check
from rojos.turns.repair import Repair, conversation_repair
from rojos.whole import whole

from ..errors import AccessRevoked, TurnLimited
from ..models import Conversation, Message, TurnRecord
from ..tools import RojoToolContext, ToolCall, ToolError, echoed, registry
from ..tools.schema import validate
from .call_line import call_line
from .caller import McpCaller
from .listing import served, served_names
from .owner_approval import owner_approval_refusal

logger = logging.getLogger(__name__)

# How long a call waits for the call before it in the same conversation to finish.
CALL_WAIT_SECONDS = 30
_BUSY = "another call with this token is still running in this project; try again"
# What the turn of a call cancelled before its answer says (the chat's page shows it).
_STOPPED = "The MCP client went away before the call's answer."


def mcp_title(token: ApiToken) -> str:
    return f"via MCP ({token.name})"


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


class _Refused(Exception):
    """The call may not start; its message says why, and nothing was stored."""


@dataclass
class _Begun:
    conversation: Conversation
    history: History
    call: dict
    assistant: Message
    record: TurnRecord
    turn_id: uuid.UUID
    ctx: RojoToolContext
    repair: Repair
    address: str | None


def _refusal(token: ApiToken | None, role: Role | None, name: str) -> str | None:
    """Why the call must not start, if it must not."""
    if token is None:
        return "This API token was revoked or has expired."
    if role is None:
        return "You are not a member of this project."
    tool = registry.get(name)
    if tool is None or not served(tool):
        offered = ", ".join(sorted(served_names(registry)))
        return f"unknown tool {echoed(name)!r}; available tools: {offered}"
    if tool.writes and token.read_only:
        return f"tool {name!r} changes files, and this API token is read-only"
    if tool.writes and not role.can_write:
        return f"tool {name!r} changes files, and your role in this project is read-only"
    return None


def _arguments_refusal(name: str, arguments: dict) -> str | None:
    """Why the arguments must not be stored (over the size limit, or not the tool's
    schema), if they must not: refused before anything is kept, as a tool error."""
    encoded = json.dumps(arguments, ensure_ascii=False)
    limit = settings.ROJO_MCP_MAX_BODY_BYTES
    if len(encoded.encode("utf-8", "surrogatepass")) > limit:
        return f"the arguments of {name!r} are over the limit of {limit:,} bytes"
    tool = registry.get(name)
    if tool is not None and tool.validates_arguments:
        try:
            validate(arguments, tool.parameters)
        except ToolError as exc:
            return str(exc)
    return None


def _conversation(token: ApiToken, project_id: int, turn_id: uuid.UUID):
    """(Blocking, in the call's transaction) The token's MCP conversation in the project,
    claimed for this call, with its history; None while another call holds it."""
    conversation = Conversation.objects.filter(via_token=token, project_id=project_id).first()
    if conversation is None:
        try:
            with transaction.atomic():
                conversation = Conversation.objects.create(
                    project_id=project_id,
                    user=token.user,
                    title=mcp_title(token),
                    via_mcp=True,
                    via_token=token,
                    turn_id=turn_id,
                    turn_heartbeat=timezone.now(),
                )
        except IntegrityError:  # a call in parallel made it first
            return None
        return conversation, History(conversation, []), True
    free = turn_claim_blocking(conversation.pk, turn_id)
    if free is None:
        return None
    return conversation, History.load_blocking(conversation), free


def _begin(caller: McpCaller, name: str, arguments: dict) -> _Begun | None:
    """(Blocking) Check the token and the role, count the user's limits, claim the
    conversation and store the call with its turn record: one transaction. None while
    another call of the conversation runs; _Refused, with nothing stored, when it may not."""
    token = api_token_live(token_id=caller.token_id)
    role = project_role(user=caller.user_id, project_id=caller.project_id)
    refusal = _refusal(token, role, name) or _arguments_refusal(name, arguments)
    if refusal:
        raise _Refused(refusal)
    if token.read_only:
        role = Role.VIEWER
    root = storage.project_root_create(caller.project_id)
    if refusal := owner_approval_refusal(
        tool=registry.get(name),
        arguments=arguments,
        role=role,
        project_id=caller.project_id,
        root=root,
    ):
        raise _Refused(refusal)
    turn_id = uuid.uuid4()
    with transaction.atomic():
        try:
            turn_limits_check(user=token.user)
        except TurnLimited as exc:
            raise _Refused(str(exc)) from None
        found = _conversation(token, caller.project_id, turn_id)
        if found is None:
            return None
        conversation, history, free = found
        repair = conversation_repair(
            conversation=conversation, history=history, root=root, taken_over=not free
        )
        asked = history.append_blocking(role=Message.Role.USER, content=f"MCP call: {name}")
        call = {
            "id": f"mcp_{uuid.uuid4().hex[:24]}",
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments, ensure_ascii=False)},
        }
        assistant = history.append_blocking(role=Message.Role.ASSISTANT, tool_calls=[call])
        record = TurnRecord.objects.create(
            conversation=conversation, user_message=asked, user=token.user
        )
    ctx = RojoToolContext(
        project_id=caller.project_id,
        project_root=root,
        user=token.user,
        role=role,
        enabled=served_names(registry),
    )
    return _Begun(
        conversation, history, call, assistant, record, turn_id, ctx, repair, caller.address
    )


def _end(begun: _Begun, *, stopped: bool = False) -> None:
    """(Blocking) Record the call's turn as done, or `stopped` (its call answered as
    interrupted if it never ran), and give the conversation up."""
    with transaction.atomic():
        ended = {"status": TurnRecord.Status.DONE, "finished": timezone.now()}
        if stopped:
            begun.history.close_open_calls_blocking()
            ended.update(status=TurnRecord.Status.STOPPED, error=_STOPPED, error_code="stopped")
        TurnRecord.objects.filter(pk=begun.record.pk).update(**ended)
        turn_release_blocking(begun.conversation.pk, begun.turn_id)


async def _begun(
    caller: McpCaller, name: str, arguments: dict, deadline: float
) -> _Begun | McpResult:
    while True:
        begin = asyncio.ensure_future(sync_to_async(_begin)(caller, name, arguments))
        try:
            begun = await asyncio.shield(begin)
        except _Refused as exc:
            return McpResult.refused(str(exc))
        except asyncio.CancelledError:  # a begin under way ends, then the turn it began
            with contextlib.suppress(_Refused):
                if (late := await begin) is not None:
                    await sync_to_async(_end)(late, stopped=True)
            raise
        if begun is not None:
            return begun
        if time.monotonic() > deadline:
            return McpResult.refused(_BUSY)
        await asyncio.sleep(0.05)


async def _run(begun: _Begun) -> McpResult:
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
            await whole(sync_to_async(_end)(begun, stopped=stopped))


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
