"""Starting a turn: count the user's limits (rojos.turns.limits) and the project's budgets
(rojos.turns.budget_starts), claim its conversation (rojos.turns.claims), store the user's
message and repair what a crash left (rojos.turns.repair) in one transaction, one trip to
the database; then start the turn's task (rojos.turns.runner), which outlives the request
that started it.
"""

import asyncio
import contextlib
import contextvars
import uuid
from dataclasses import dataclass

from asgiref.sync import sync_to_async
from django.db import transaction
from django.http import Http404
from django.utils import timezone

from roject import storage
from roject.members.access import ProjectAccess
from roject.server.draining import draining
from rojos.agent.branches import branch_fork, branch_started
from rojos.agent.events import StartEvent
from rojos.agent.history import History
from rojos.context.budgets import Budget, Left
from rojos.context.model_choice import (
    ModelInUse,
    conversation_model_after,
    model_in_use_blocking,
    model_stored,
)
from rojos.errors import ServerDraining, TurnBusy, TurnNotStarted
from rojos.mcp.spec import McpLink, rojo_mcp_links
from rojos.models import Conversation, Message, Rojo, TurnRecord
from rojos.models.claims import process_owner
from rojos.outages import UNAVAILABLE_CODE, outage_message
from rojos.tools import RojoToolContext, RojoToolRegistry, registry
from rojos.turns.admission import StartSlot
from rojos.turns.budget_starts import project_budget_start_check
from rojos.turns.claims import turn_claim_blocking
from rojos.turns.control_layer import control_layer
from rojos.turns.limits import turn_limits_check
from rojos.turns.log import Turn
from rojos.turns.registry import turn_register
from rojos.turns.relay import turn_group
from rojos.turns.repair import Repair, conversation_repair
from rojos.turns.runner import turn_end_record, turn_run

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
    """
    if draining():  # roject/server/graceful.py: this process takes no new turns
        raise ServerDraining("This server is restarting; send the message again in a moment.")
    asked = (access, user, rojo, conversation, message, auto_approve, limits, replace)
    starting = asyncio.ensure_future(
        _turn_start(*asked, attachments, admission, budgets, client_key, model)
    )
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
) -> Turn:
    turn_id = uuid.uuid4()
    # The project's budgets in force, as the caller read them: none, no lock and no query.
    in_force = None if budgets is None else [left.budget for left in budgets]
    asked = (access, conversation, rojo, user, message, turn_id, limits, replace, attachments)
    begun = await sync_to_async(_begin)(*asked, in_force, client_key, model)
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
            await begun.repair.files_repair()
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


@dataclass
class _Begun:
    conversation: Conversation
    history: History
    message: Message
    record: TurnRecord
    repair: Repair
    mcp_links: tuple[McpLink, ...]
    model: ModelInUse


def _turn_tools(links: tuple[McpLink, ...]) -> RojoToolRegistry:
    """The shared registry, or, for a rojo that uses MCP servers, one with their tools."""
    if not links:
        return registry
    from rojos.mcp.tools import TurnTools  # the SDK is imported by turns that use it

    return TurnTools(registry, links)


def _begin(
    access: ProjectAccess,
    conversation: Conversation | None,
    rojo: Rojo,
    user,
    message: str,
    turn_id: uuid.UUID,
    limits: bool,
    replace: int | None = None,
    attachments: list[dict] | None = None,
    in_force: list[Budget] | None = None,
    client_key: str = "",
    model: str = "",
) -> _Begun | None:
    """(Blocking) Count the user's limits, claim the conversation, load its history and
    store the user's message with the turn's record: one transaction, so that a message is
    never stored without the turn that answers it, nor a claim left without its record, and
    the record claims its place in the limits as they are counted. None when a turn is
    running; TurnLimited or BudgetExceeded, with nothing stored, over a limit or a project's
    budget.

    A new conversation is made claimed, with nothing to load; a claimed one is repaired
    only after a crash (a takeover, or calls left open). The project's root is made here
    too, on the same thread.
    """
    root = storage.project_root_create(access.project.pk)
    with transaction.atomic():
        if limits and user is not None:
            turn_limits_check(user=user)
        project_budget_start_check(project_id=access.project.pk, in_force=in_force)
        if conversation is None:
            conversation = Conversation.objects.create(
                project=access.project,
                rojo=rojo,
                user=user,
                title=Conversation.title_from(message),
                turn_id=turn_id,
                turn_heartbeat=timezone.now(),
                turn_owner=process_owner(),
                client_key=client_key,
                model=model_stored(rojo, model),
            )
            history, free = History(conversation, []), True
        else:
            free = _claim(conversation, turn_id)
            if free is None:
                return None
            history = History.load_blocking(conversation)
        repair = conversation_repair(
            conversation=conversation, history=history, root=root, taken_over=not free
        )
        changed = ["rojo"] if conversation.rojo_id != rojo.pk else []
        chosen = conversation_model_after(
            conversation, rojo, model, rojo_changed=bool(changed), fork=replace is not None
        )
        if chosen is not None:
            conversation.model = chosen
            changed.append("model")
        if client_key and conversation.client_key != client_key:
            conversation.client_key = client_key  # where the client's latest message went
            changed.append("client_key")
        if replace is not None:
            history = _fork(conversation, history, replace)
            changed += ["branch", "branches"]
        extra = _attachments_extra(attachments or [])
        user_message = history.append_blocking(role=Message.Role.USER, content=message, extra=extra)
        record = TurnRecord.objects.create(
            conversation=conversation, user_message=user_message, rojo=rojo, user=user
        )
        if replace is not None:
            branch_started(conversation, first=user_message)
        conversation.rojo = rojo
        if changed:
            conversation.save(update_fields=changed)
    links = rojo_mcp_links(rojo)  # no query for a rojo loaded knowing it uses none
    in_use = model_in_use_blocking(rojo, model or conversation.model)
    return _Begun(conversation, history, user_message, record, repair, links, in_use)


def _attachments_extra(attachments: list[dict]) -> dict:
    """A user message's `extra` for its attachments: files' text, images by reference, and
    uploaded PDFs by reference with their text."""
    kinds = {"attachments": [], "images": [], "pdfs": []}
    for attached in attachments:
        kind = attached.get("type", "")
        key = "images" if kind.startswith("image/") else "pdfs" if kind else "attachments"
        kinds[key].append(attached)
    return {key: found for key, found in kinds.items() if found}


def _claim(conversation: Conversation, turn_id: uuid.UUID) -> bool | None:
    """(Blocking) Claim the conversation on the branch it was read with; if another request
    forked or switched it since, read its branches again and claim that one. A path depends
    only on its branch's ancestors, which never change: the same branch, the same path."""
    free = turn_claim_blocking(conversation.pk, turn_id, branch=conversation.branch)
    if free is None:
        conversation.refresh_from_db(fields=["branch", "branches"])
        free = turn_claim_blocking(conversation.pk, turn_id, branch=conversation.branch)
    return free


def _fork(conversation: Conversation, history: History, replace: int) -> History:
    """(Blocking) The history a message replacing the user message `replace` continues:
    the active path before it, on a new branch; 404 for no such message on that path."""
    replaced = next(
        (m for m in history.messages if m.pk == replace and m.role == Message.Role.USER), None
    )
    if replaced is None:
        raise Http404("No such message in this conversation's active branch.")
    index = history.messages.index(replaced)
    branch_fork(conversation, messages=history.messages, replaced=replaced)
    return History(conversation, history.messages[:index])
