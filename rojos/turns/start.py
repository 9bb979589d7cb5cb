"""Starting a turn: its stored start in one trip to the database (rojos.turns.begin: the
limits, the budgets, the claim, the user's message, a crash's repair, in one transaction),
then the turn's task (rojos.turns.runner), which outlives the request that started it.
"""

import asyncio
import contextlib
import contextvars
import uuid

from asgiref.sync import sync_to_async

from roject.members.access import ProjectAccess
from rojos.agent.events import StartEvent
from rojos.context.budgets import Left
from rojos.errors import TurnBusy, TurnNotStarted
from rojos.mcp.spec import McpLink
from rojos.models import Conversation, Rojo
from rojos.outages import UNAVAILABLE_CODE, outage_message
from rojos.tools import RojoToolContext, RojoToolRegistry, registry
from rojos.turns.admission import StartSlot, new_turns_taken
from rojos.turns.begin import turn_begin_blocking
from rojos.turns.control_layer import control_layer
from rojos.turns.log import Turn
from rojos.turns.registry import turn_register, turn_starting
from rojos.turns.relay import turn_group
from rojos.turns.runner import turn_run
from rojos.turns.writeback import turn_end_record

__all__ = ["turn_start"]

# A turn that could not start for a fault of its own (not a service down) records this.
_NOT_STARTED = "The reply could not start on the server; see its log."


async def turn_start(
    *,
    access: ProjectAccess,
    user,
    rojo: Rojo,
    conversation: Conversation | None,
    message: str,
    auto_approve: bool | None = None,
    limits: bool = True,
    replace: int | None = None,
    attachments: list[dict] | None = None,
    admission: StartSlot | None = None,
    budgets: list[Left] | None = None,
    client_key: str = "",
    model: str = "",
    token_id: int | None = None,
    session_key: str | None = None,
) -> Turn:
    """Claim the conversation (a new one when None), store the user's message (with the
    files it attaches, rojos/provider/attachments.py, and its images and uploaded PDFs by
    reference, by their `type`: rojos/provider/images.py) and start the turn's task.

    Raises, before storing anything, TurnLimited when the user is over a per-user limit
    (unless `limits` is False: an operator's command), BudgetExceeded when the project's
    budget is used up or reserved by its running replies (rojos.turns.budget_starts), and TurnBusy
    when a turn is already running; TurnNotStarted, after storing the message and recording
    the turn as failed, when the turn cannot start (the channel layer or the database is
    down); ServerDraining when this process shuts down. Calls that need approval wait for a
    person unless `auto_approve` decides them all (scripts). With `replace`, the id of a user
    message of the active branch, the message forks the conversation there (an edit, or a
    regenerate with the same text: rojos/agent/branches.py).

    A client that hangs up meanwhile does not stop the start half-way (a stored message
    and a claim with no turn behind it): a turn outlives its request, so it starts, and the
    cancellation goes on once it has.

    `admission`, the start's place among those under way (rojos.turns.admission), goes to
    the turn's task, which gives it back; if this raises, the caller gives it back.
    `budgets`, what is left of the budgets as the caller read them with `access`, spares the
    turn's first step reading them again (else it does). `client_key` is kept on the
    conversation, for its client to find it by if the answer never reaches it.

    `model` is the model this turn asks, one the rojo offers (the caller checked:
    rojos.context.model_choice.model_check); empty: the conversation's. It becomes the
    conversation's model too, unless the turn is a fork (`replace`: a regenerate with
    another model is a branch beside the other model's answer, and the conversation keeps
    its model).

    `token_id`, the API token the request came with: revoked or expired, it ends the turn
    at its next step or call (rojos.agent.tool_calls), as a removal from the project does;
    `session_key`, the login session it came with (none with a token), the same once the
    session is logged out or the user's password changes.
    """
    new_turns_taken()  # none while this process shuts down (roject/server/graceful.py)
    asked = (access, user, rojo, conversation, message, auto_approve, limits, replace)
    signed_in = (token_id, session_key)
    starting = asyncio.ensure_future(
        _turn_start(*asked, attachments, admission, budgets, client_key, model, signed_in)
    )
    turn_starting(starting)  # a shutdown from now on waits for it (rojos.turns.shutdown)
    try:
        return await asyncio.shield(starting)
    except asyncio.CancelledError:
        with contextlib.suppress(Exception):
            await starting
        raise


async def _turn_start(
    access,
    user,
    rojo,
    conversation,
    message,
    auto_approve,
    limits,
    replace,
    attachments=None,
    admission=None,
    budgets=None,
    client_key="",
    model="",
    signed_in=(None, None),
) -> Turn:
    turn_id = uuid.uuid4()
    # The project's budgets in force, as the caller read them: none, no lock and no query.
    in_force = None if budgets is None else [left.budget for left in budgets]
    begun = await sync_to_async(turn_begin_blocking)(
        access=access,
        conversation=conversation,
        rojo=rojo,
        user=user,
        message=message,
        turn_id=turn_id,
        limits=limits,
        replace=replace,
        attachments=attachments,
        in_force=in_force,
        client_key=client_key,
        model=model,
    )
    if begun is None:
        raise TurnBusy("A reply is still running in this conversation; wait or stop it first.")
    turn = Turn(begun.conversation.pk)
    turn.record_id = begun.record.pk
    turn.message_id = begun.message.pk
    turn.auto_approve = auto_approve
    layer = control_layer()
    channel = None
    try:
        channel = await layer.new_channel()
        await layer.group_add(turn_group(turn.conversation_id), channel)
        if begun.repair.needed:  # the last turn was cut off by a crash
            await begun.repair.complete()
    except BaseException as exc:
        # Stored, but it cannot run: end it as failed and give the conversation up. Its
        # record says what the chat's answer says (rojos.web.errors): a service down, or
        # a fault to find in the log.
        told = outage_message(exc)
        message, code = (told, UNAVAILABLE_CODE) if told else (_NOT_STARTED, "internal")
        turn.fail(message, code)
        with contextlib.suppress(Exception):
            if channel is not None:
                await layer.group_discard(turn_group(turn.conversation_id), channel)
        await sync_to_async(turn_end_record)(turn, turn_id)
        if isinstance(exc, Exception):
            raise TurnNotStarted(message, turn.conversation_id) from exc
        raise
    ctx = RojoToolContext(
        project_id=access.project.pk,
        project_root=begun.repair.root,
        user=user,
        role=access.role,
        enabled=frozenset(rojo.tools or ()),
        token_id=signed_in[0],
        session_key=signed_in[1],
    )
    turn.publish(StartEvent(conversation=turn.conversation_id, message=begun.message.pk))
    turn_register(turn)
    # A fresh context: the task must not inherit the request's thread-sensitive context,
    # which ends with the request (its ORM calls would land on a leaked thread).
    if admission is not None:
        admission.handed = True
    turn.task = asyncio.create_task(
        turn_run(
            turn,
            turn_id=turn_id,
            history=begun.history,
            rojo=rojo,
            ctx=ctx,
            tools=_turn_tools(begun.mcp_links),
            layer=layer,
            channel=channel,
            admission=admission,
            budgets=budgets,
            model=begun.model,
        ),
        context=contextvars.Context(),
    )
    if admission is not None:  # a task cancelled before it ran never reaches its own release
        turn.task.add_done_callback(lambda _: admission.release())
    return turn


def _turn_tools(links: tuple[McpLink, ...]) -> RojoToolRegistry:
    """The shared registry, or, for a rojo that uses MCP servers, one with their tools."""
    if not links:
        return registry
    from rojos.mcp.tools import TurnTools  # the SDK is imported by turns that use it

    return TurnTools(registry, links)
