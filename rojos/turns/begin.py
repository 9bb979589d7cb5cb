"""A turn's start on the database thread: count the user's limits (rojos.turns.limits) and
the project's budgets (rojos.turns.budget_starts), claim the conversation
(rojos.turns.claims), store the user's message and repair what a crash left
(rojos.turns.repair), in one transaction; rojos.turns.start runs it and starts the turn.
"""

import uuid
from dataclasses import dataclass

from django.db import transaction
from django.http import Http404
from django.utils import timezone

from roject import storage
from roject.members.access import ProjectAccess
from roject.server.prepared_inserts import PreparedInsert
from rojos.agent.branches import branch_fork, branch_started
from rojos.agent.history import History
from rojos.context.budgets import Budget
from rojos.context.model_choice import (
    ModelInUse,
    conversation_model_after,
    model_in_use_blocking,
    model_stored,
)
from rojos.mcp.spec import McpLink, rojo_mcp_links
from rojos.models import Conversation, Message, Rojo, TurnRecord
from rojos.models.claims import process_owner
from rojos.turns.budget_starts import budget_start_check, unpriced_model_check
from rojos.turns.claims import turn_claim_blocking
from rojos.turns.limits import turn_limits_check
from rojos.turns.repair import Repair, conversation_repair

__all__ = ["Begun", "turn_begin_blocking"]

# Their INSERTs compiled once (every chat message stores one of each, the user's message
# through History.append_blocking's).
_CONVERSATION = PreparedInsert(Conversation)
_RECORD = PreparedInsert(TurnRecord)


@dataclass
class Begun:
    """What a turn starts from, stored."""

    conversation: Conversation
    history: History
    message: Message
    record: TurnRecord
    repair: Repair
    mcp_links: tuple[McpLink, ...]
    model: ModelInUse


def turn_begin_blocking(
    *,
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
) -> Begun | None:
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
        binding = budget_start_check(user=user, project_id=access.project.pk, in_force=in_force)
        if conversation is None:
            conversation = _CONVERSATION.create(
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
            free = _claim(conversation, turn_id, fork=replace is not None)
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
        in_use = model_in_use_blocking(rojo, model or conversation.model)
        unpriced_model_check(model=in_use, budgets=binding)
        if client_key and conversation.client_key != client_key:
            conversation.client_key = client_key  # where the client's latest message went
            changed.append("client_key")
        if replace is not None:
            history = _fork(conversation, history, replace)
            changed += ["branch", "branches"]
        extra = _attachments_extra(attachments or [])
        user_message = history.append_blocking(role=Message.Role.USER, content=message, extra=extra)
        record = _RECORD.create(
            conversation=conversation, user_message=user_message, rojo=rojo, user=user
        )
        if replace is not None:
            branch_started(conversation, first=user_message)
        conversation.rojo = rojo
        if changed:
            conversation.save(update_fields=changed)
    links = rojo_mcp_links(rojo)  # no query for a rojo loaded knowing it uses none
    return Begun(conversation, history, user_message, record, repair, links, in_use)


def _attachments_extra(attachments: list[dict]) -> dict:
    """A user message's `extra` for its attachments: files' text, images by reference, and
    uploaded PDFs by reference with their text."""
    kinds = {"attachments": [], "images": [], "pdfs": []}
    for attached in attachments:
        kind = attached.get("type", "")
        key = "images" if kind.startswith("image/") else "pdfs" if kind else "attachments"
        kinds[key].append(attached)
    return {key: found for key, found in kinds.items() if found}


def _claim(conversation: Conversation, turn_id: uuid.UUID, *, fork: bool) -> bool | None:
    """(Blocking) Claim the conversation on the branch it was read with; if another request
    forked or switched it since, read its branches again and claim that one. A path depends
    only on its branch's ancestors, which never change: the same branch, the same path.

    A `fork` (an edit or a regenerate) reads the branches again once it holds the claim:
    another request may have forked and switched back to the same branch since they were
    read, and a new branch takes the number after all of them (rojos.agent.branches); with
    the list read before, it took that other fork's number and overwrote its entry."""
    free = turn_claim_blocking(conversation.pk, turn_id, branch=conversation.branch)
    if free is None:
        try:
            conversation.refresh_from_db(fields=["branch", "branches"])
        except Conversation.DoesNotExist:  # deleted since the chat read it
            raise Http404("No such conversation.") from None
        free = turn_claim_blocking(conversation.pk, turn_id, branch=conversation.branch)
    if free is not None and fork:
        conversation.refresh_from_db(fields=["branches"])
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
