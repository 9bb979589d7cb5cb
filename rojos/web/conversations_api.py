"""The conversation endpoints: a project's list and badges, and one conversation's detail,
usage, export, rename, pin, delete and branch switch. Thin, like rojos/web/api.py, which mounts
this router; the chat stream and its controls stay there."""

import asyncio
import json

from asgiref.sync import async_to_sync
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from ninja import Router, Status

from roject import storage
from roject.api_answers import answers
from roject.audit.log import AuditAction, audit_actor, audit_record
from roject.members.access import project_access
from roject.server.streaming import blocking_stream
from rojos.conversations import listing, usage_report
from rojos.conversations import services as conversations
from rojos.conversations.export import conversation_export_json, conversation_export_markdown
from rojos.turns.repair import dead_turn_end
from rojos.web import selectors
from rojos.web.schemas import (
    BranchIn,
    BranchOut,
    ConversationChangeIn,
    ConversationDetail,
    ConversationItem,
    ConversationOut,
    ConversationStatusOut,
    ConversationUsageOut,
    DeletedOut,
)

router = Router(tags=["chat"])


@router.get(
    "/projects/{project_id}/conversations",
    response=answers(list[ConversationItem], 404, 422),
    tags=["chat"],
)
def conversation_list(
    request: HttpRequest, project_id: int, before: str = "", limit: int = 50, key: str = ""
):
    """A page of a project's conversations, newest first, with their author and badge;
    the next page starts `before` the last one's `cursor`. With `key`: only your
    conversation whose latest message came with that key (the chat's `key`), if any."""
    access = project_access(user=request.auth, project_id=project_id)
    if key:
        return listing.conversation_keyed(project=access.project, user=request.auth, key=key)
    return listing.conversation_page(project=access.project, before=before, limit=limit)


@router.get(
    "/projects/{project_id}/conversations/status",
    response=answers(ConversationStatusOut, 404, 422),
    tags=["chat"],
)
def conversation_status(request: HttpRequest, project_id: int, ids: str = ""):
    """The badges of the conversations `ids` (comma-separated) and of every running one:
    light enough to poll every few seconds."""
    access = project_access(user=request.auth, project_id=project_id)
    wanted = [int(i) for i in ids.split(",") if i.isascii() and i.isdigit() and len(i) <= 18]
    statuses = listing.conversation_statuses(project=access.project, ids=wanted)
    return {"statuses": {str(k): v for k, v in statuses.items()}}


@router.patch(
    "/conversations/{conversation_id}",
    response=answers(ConversationOut, 403, 404, 422),
    tags=["chat"],
)
def conversation_change(request: HttpRequest, conversation_id: int, payload: ConversationChangeIn):
    """Rename a conversation or pin it: editors and owners, any conversation of the project."""
    conversation, _ = selectors.conversation_access(
        user=request.auth, conversation_id=conversation_id, write=True
    )
    return conversations.conversation_change(
        conversation=conversation, title=payload.title, pinned=payload.pinned
    )


@router.delete(
    "/conversations/{conversation_id}",
    response=answers(DeletedOut, 403, 404, 409, 422),
    tags=["chat"],
)
async def conversation_delete(request: HttpRequest, conversation_id: int):
    """Delete a conversation (editors and owners); a running reply is stopped first. The
    files it changed stay, and their changes can still be undone from the admin."""
    conversation, _ = await selectors.aconversation_access(
        user=request.auth, conversation_id=conversation_id, write=True
    )
    await conversations.conversation_delete(
        conversation=conversation, actor=audit_actor(request, user=request.auth)
    )
    return {"deleted": conversation.pk}


@router.post(
    "/conversations/{conversation_id}/branch",
    response=answers(BranchOut, 403, 404, 409, 422),
    tags=["chat"],
)
def conversation_branch(request: HttpRequest, conversation_id: int, payload: BranchIn):
    """Show another branch: the newest one through `message` (a `< 2/3 >` choice); 409
    while a reply runs."""
    conversation, access = selectors.conversation_access(
        user=request.auth, conversation_id=conversation_id
    )
    selectors.conversation_steer_check(conversation=conversation, access=access, user=request.auth)
    branch = conversations.conversation_branch_switch(
        conversation=conversation, message_id=payload.message
    )
    return {"branch": branch}


@router.get(
    "/conversations/{conversation_id}",
    response=answers(ConversationDetail, 404, 422),
    tags=["chat"],
)
def conversation_detail(request: HttpRequest, conversation_id: int):
    """One conversation with all its messages, tool calls and tool results."""
    conversation, _ = selectors.conversation_access(
        user=request.auth, conversation_id=conversation_id
    )
    async_to_sync(dead_turn_end)(conversation)  # a turn whose process is gone reads as ended
    return selectors.conversation_detail_get(conversation=conversation)


@router.get(
    "/conversations/{conversation_id}/usage",
    response=answers(ConversationUsageOut, 404, 422),
    tags=["chat"],
)
def conversation_usage(request: HttpRequest, conversation_id: int):
    """Tokens and cost of each turn and of the whole conversation, and how much of the
    rojo's context window the next request would take."""
    conversation, _ = selectors.conversation_access(
        user=request.auth, conversation_id=conversation_id
    )
    return usage_report.conversation_usage(conversation=conversation)


@router.get(
    "/conversations/{conversation_id}/export", response=answers(None, 400, 404, 422), tags=["chat"]
)
def conversation_export(request: HttpRequest, conversation_id: int, format: str = "json"):
    """Download a conversation: `format=json` (stored messages) or `format=markdown`."""
    conversation, _ = selectors.conversation_access(
        user=request.auth, conversation_id=conversation_id
    )
    if format == "markdown":
        body = conversation_export_markdown(conversation)
        response = HttpResponse(body, content_type="text/markdown; charset=utf-8")
        extension = "md"
    elif format == "json":
        body = json.dumps(conversation_export_json(conversation), ensure_ascii=False, indent=2)
        response = HttpResponse(body, content_type="application/json")
        extension = "json"
    else:
        return Status(400, {"detail": "format must be json or markdown"})
    audit_record(
        action=AuditAction.EXPORT,
        actor=audit_actor(request, user=request.auth),
        project=conversation.project_id,
        obj=conversation,
        details={"format": format},
    )
    response["Content-Disposition"] = (
        f'attachment; filename="conversation-{conversation.pk}.{extension}"'
    )
    return response


@router.get(
    "/conversations/{conversation_id}/results/{handle}",
    response=answers(None, 404, 422),
    tags=["chat"],
)
async def conversation_result(request: HttpRequest, conversation_id: int, handle: str):
    """The whole of a tool result too large to hand the model (it got its head and this
    handle): for whoever may read the conversation, streamed as UTF-8 text."""
    conversation, _ = await selectors.aconversation_access(
        user=request.auth, conversation_id=conversation_id
    )
    try:
        produce = await asyncio.to_thread(
            storage.result_download_open,
            project_id=conversation.project_id,
            conversation_id=conversation.pk,
            handle=handle,
        )
    except storage.StorageError:
        raise Http404("No such result in this conversation.") from None
    response = StreamingHttpResponse(
        blocking_stream(produce), content_type="text/plain; charset=utf-8"
    )
    response["Content-Disposition"] = f'inline; filename="result-{handle}.txt"'
    response["Cache-Control"] = "no-store"
    return response
