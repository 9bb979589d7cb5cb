"""Changing conversations: rename, delete, switch the active branch.

Who may: renaming, pinning and deleting change what every member sees, so they take a role that
writes (editors and owners, any conversation of the project); a viewer may do neither.
Switching branches is part of chatting (any member who may send to the conversation may
switch it), and is refused while a turn runs: a turn only appends to the active branch.
"""

import asyncio
import time
import uuid

from asgiref.sync import sync_to_async
from django.db import transaction
from django.http import Http404

from roject import storage
from roject.audit.log import AuditAction, AuditActor, audit_record
from roject.errors import AppError
from rojos.agent.branches import branch_leaf
from rojos.context.model_choice import model_check, model_stored
from rojos.errors import TurnBusy
from rojos.models import Conversation, Message
from rojos.turns.claims import turn_claim_blocking
from rojos.turns.control import turn_stop

# How long a delete waits for the running turn it stopped to end.
_STOP_WAIT_SECONDS = 10.0


class ConversationBusy(TurnBusy):
    """A turn runs in the conversation, and what was asked needs it to have ended (409)."""


def conversation_change(
    *, conversation: Conversation, title: str | None = None, pinned: bool | None = None
) -> Conversation:
    """(Blocking) Rename the conversation (a title of one line: the list shows it whole)
    and pin it to the head of the list or unpin it."""
    fields = []
    if title is not None and title.strip():
        conversation.title = " ".join(title.split())[:200]
        fields.append("title")
    if pinned is not None:
        conversation.pinned = pinned
        fields.append("pinned")
    if fields:
        conversation.save(update_fields=fields)  # not `updated`: no new activity
    return conversation


async def conversation_delete(
    *, conversation: Conversation, actor: AuditActor | None = None
) -> None:
    """Delete the conversation, its messages and turn records, audited as `actor`'s (None:
    the system's). A running turn is stopped first, and the delete waits for it to end
    (ConversationBusy after a while). The files it changed stay as they are; their change
    records stay too, without the conversation, so they can still be undone from the
    project's side. The tool results kept for it (too large to hand over whole) go too, and
    the images and PDFs its messages attached that no other conversation of the project
    shows."""
    deadline = time.monotonic() + _STOP_WAIT_SECONDS
    while not await sync_to_async(_delete)(conversation, actor or AuditActor()):
        # A turn holds it, one started after this request read it too: stop it, as it
        # stands now (the claim read again), and try again once it has ended.
        if time.monotonic() > deadline:
            raise ConversationBusy("The reply did not stop in time; try again in a moment.")
        await conversation.arefresh_from_db(fields=["turn_id", "turn_heartbeat", "turn_owner"])
        await turn_stop(conversation=conversation)
        await asyncio.sleep(0.1)


def kept_referenced(messages, key: str) -> set[str]:
    """(Blocking) The kept files (by sha256) the messages refer to under `key`: images,
    pdfs."""
    found = messages.filter(extra__has_key=key).values_list("extra", flat=True)
    return {kept["sha256"] for extra in found for kept in extra[key]}


def _delete(conversation: Conversation, actor: AuditActor) -> bool:
    """(Blocking) Delete the conversation under a claim of its own, taken in the delete's
    transaction as a turn's is: a message sent meanwhile then finds it claimed (409) or
    gone (404). Checked only before, the delete went on under a turn that had just claimed
    it, whose messages then failed to store or were lost with it. False when a turn holds
    it now (nothing deleted); True when deleted, or gone already."""
    rows = Conversation.objects.filter(pk=conversation.pk)
    with transaction.atomic():
        if turn_claim_blocking(conversation.pk, uuid.uuid4()) is None:
            return not rows.exists()  # a live turn's claim, or deleted by another request
        own = Message.objects.filter(conversation=conversation)
        images, pdfs = kept_referenced(own, "images"), kept_referenced(own, "pdfs")
        deleted, _ = rows.delete()
        if deleted:  # not when another request deleted it first
            audit_record(
                action=AuditAction.CONVERSATION_DELETED,
                actor=actor,
                project=conversation.project_id,
                obj=conversation,
                details={"title": conversation.title[:80]},
            )
    # After the commit: a result kept for it is of no use once the conversation is gone,
    # nor its images and PDFs, unless another conversation of the project shows them.
    project_id = conversation.project_id
    others = Message.objects.filter(conversation__project_id=project_id)
    images = images - kept_referenced(others, "images") if images else set()
    pdfs = pdfs - kept_referenced(others, "pdfs") if pdfs else set()

    def remove() -> None:
        storage.results_remove(project_id=project_id, conversation_id=conversation.pk)
        storage.images_remove(project_id=project_id, sha256s=images)
        storage.pdfs_remove(project_id=project_id, sha256s=pdfs)

    storage.removal_when_unlocked(project_id, remove)  # not from under a backup's copy
    return True


def conversation_branch_switch(*, conversation: Conversation, message_id) -> int:
    """(Blocking) Show the branch through one message (a `< 2/3 >` choice, a search hit):
    the newest branch whose path has it. Returns the branch; 404 for a message of another
    conversation, ConversationBusy while a turn runs."""
    message = Message.objects.filter(conversation=conversation, pk=message_id).first()
    if message is None:
        raise Http404("No such message.")
    branch = branch_leaf(conversation, message=message)
    switched = Conversation.objects.filter(pk=conversation.pk, turn_id__isnull=True).update(
        branch=branch
    )
    if not switched:
        raise ConversationBusy("A reply is running here; switch branches when it is done.")
    conversation.branch = branch
    return branch


def conversation_model_change(*, conversation: Conversation, model: str) -> str:
    """(Blocking) Pick the model the conversation's next turns ask (the rojo bar's picker):
    one its rojo offers (ModelNotOffered otherwise). A running turn keeps the model it
    started with. Returns the model now in use."""
    rojo = conversation.rojo
    if rojo is None:
        raise AppError("This conversation's rojo was deleted; pick another rojo and send.")
    model_check(rojo, model)
    conversation.model = model_stored(rojo, model)
    Conversation.objects.filter(pk=conversation.pk).update(model=conversation.model)
    return model
