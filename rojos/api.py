"""The JSON API and the chat stream: thin endpoints that check access, call a service, encode."""

import json
import logging
from datetime import datetime
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.exceptions import PermissionDenied, RequestDataTooBig, SuspiciousOperation
from django.db import OperationalError, connections
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.http.multipartparser import MultiPartParserError
from ninja import Field, NinjaAPI, Schema
from ninja.security import django_auth
from redis.exceptions import RedisError

from roject.access import LoginRequired, ProjectAccess, aproject_access, object_id, project_access
from roject.api_answers import answers
from roject.files_api import router as files_router
from roject.models import Membership
from roject.storage import StorageError

from . import turn_relay, turns, undo
from .errors import TurnBusy, TurnLimited, TurnNotStarted
from .export import conversation_export_json, conversation_export_markdown
from .models import Conversation, FileChange, Message, Rojo, TurnRecord
from .replay import conversation_events
from .selectors import aconversation_access, conversation_access, rojo_get
from .wire import WireEvent, encoder_for

logger = logging.getLogger(__name__)

api = NinjaAPI(title="Rojo Chat API", version="1", auth=django_auth, urls_namespace="api")
api.add_router("/projects", files_router)


def _error(request, status: int, message: str):
    return api.create_response(request, {"detail": message}, status=status)


@api.exception_handler(LoginRequired)
def _login_required(request, exc):
    return _error(request, 401, "Log in first.")


@api.exception_handler(PermissionDenied)
def _permission_denied(request, exc):
    return _error(request, 403, str(exc) or "Not allowed.")


@api.exception_handler(Http404)
def _not_found(request, exc):
    return _error(request, 404, str(exc) or "Not found.")


@api.exception_handler(undo.UndoRefused)
def _undo_refused(request, exc):
    return _error(request, 409, str(exc))


@api.exception_handler(MultiPartParserError)
@api.exception_handler(SuspiciousOperation)
def _unreadable_request(request, exc):
    """A body Django cannot parse: JSON like every other answer, not an HTML page (or, with
    DEBUG, a 500)."""
    logger.warning("%s %s: unreadable request: %s", request.method, request.path, exc)
    if isinstance(exc, RequestDataTooBig):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        return _error(request, 413, f"The request is over the server's {limit:,}-byte limit.")
    return _error(request, 400, "The request's body could not be read.")


@api.exception_handler(StorageError)
def _storage_error(request, exc):
    return _error(request, 400, str(exc))


@api.exception_handler(TurnBusy)
def _turn_busy(request, exc):
    return _error(request, 409, str(exc))


_DATABASE_DOWN = "The database is busy or unreachable; try again in a moment."
_RELAY_DOWN = "The server cannot reach its message relay; try again in a moment."


def _unavailable(request, message: str, exc: Exception, **extra):
    logger.warning("%s %s: %s (%s)", request.method, request.path, message, exc)
    response = api.create_response(request, {"detail": message, **extra}, status=503)
    response["Retry-After"] = "5"
    return response


@api.exception_handler(OperationalError)
def _database_unavailable(request, exc):
    """A database that is locked past its timeout or unreachable: a clear 503, not a 500 page."""
    return _unavailable(request, _DATABASE_DOWN, exc)


@api.exception_handler(RedisError)
def _relay_unavailable(request, exc):
    """Redis, the channel layer that relays Stop and approvals between processes, is down."""
    return _unavailable(request, _RELAY_DOWN, exc)


@api.exception_handler(TurnNotStarted)
def _turn_not_started(request, exc):
    """The message is stored but its turn could not start: say why, and name its conversation."""
    cause, conversation = exc.__cause__, exc.conversation_id
    if isinstance(cause, RedisError):
        return _unavailable(request, _RELAY_DOWN, cause, conversation=conversation)
    if isinstance(cause, OperationalError):
        return _unavailable(request, _DATABASE_DOWN, cause, conversation=conversation)
    logger.error("%s %s: %s", request.method, request.path, exc, exc_info=cause)
    return api.create_response(
        request, {"detail": str(exc), "conversation": conversation}, status=500
    )


@api.exception_handler(TurnLimited)
def _turn_limited(request, exc):
    response = _error(request, 429, str(exc))
    response["Retry-After"] = "60"
    return response


class ProjectOut(Schema):
    id: int
    name: str
    slug: str
    role: str


class RojoOut(Schema):
    id: int
    name: str
    slug: str
    model: str
    base_url: str
    tools: list[str]


class ConversationOut(Schema):
    id: int
    title: str
    rojo_id: int | None
    user_id: int | None
    created: datetime
    updated: datetime
    running: bool


class MessageOut(Schema):
    id: int
    position: int
    role: str
    content: str | None
    tool_calls: list[dict] | None
    tool_call_id: str
    name: str
    is_error: bool
    reasoning: str
    created: datetime


class ChangeOut(Schema):
    id: int
    tool_call_id: str
    message_id: int | None
    tool: str
    paths: list[str]
    created: datetime
    undone: datetime | None


class TurnOut(Schema):
    user_message_id: int
    status: str
    error: str
    error_code: str


class ConversationDetail(ConversationOut):
    project_id: int
    messages: list[MessageOut]
    changes: list[ChangeOut]
    turns: list[TurnOut]
    events: list[dict] = Field(description="Each stored turn's events, as the chat streams them.")


class ApprovalIn(Schema):
    call: str = Field(description="The id of the tool call waiting for approval.")
    approve: bool


class UndoTurnIn(Schema):
    message: int = Field(description="The id of the user message that started the turn.")


class ApprovalOut(Schema):
    delivered: bool


class UndoneOut(Schema):
    undone: list[int] = Field(description="The ids of the changes undone, newest first.")


class StopOut(Schema):
    stopping: bool = Field(description="False when no reply was running.")


class ChatIn(Schema):
    rojo: int | str = Field(description="The rojo's id or slug.")
    message: str = Field(min_length=1, max_length=100_000)
    conversation: int | None = None


def _conversation_out(conversation: Conversation) -> dict[str, Any]:
    return {
        "id": conversation.pk,
        "title": conversation.title,
        "rojo_id": conversation.rojo_id,
        "user_id": conversation.user_id,
        "created": conversation.created,
        "updated": conversation.updated,
        "running": conversation.running,
    }


@api.get("/projects", response=answers(list[ProjectOut]), tags=["projects"])
def project_list(request: HttpRequest):
    """The projects you are a member of, with your role."""
    memberships = Membership.objects.filter(user=request.auth).select_related("project")
    return [
        {"id": m.project.pk, "name": m.project.name, "slug": m.project.slug, "role": m.role}
        for m in memberships.order_by("project__name")
    ]


@api.get("/rojos", response=answers(list[RojoOut]), tags=["rojos"])
def rojo_list(request: HttpRequest):
    """The rojos you can chat with (their keys are never included)."""
    return list(Rojo.objects.all())


@api.get(
    "/projects/{project_id}/conversations",
    response=answers(list[ConversationOut], 404, 422),
    tags=["chat"],
)
async def conversation_list(request: HttpRequest, project_id: int):
    """A project's conversations, newest first."""
    access = await aproject_access(user=request.auth, project_id=project_id)
    conversations = Conversation.objects.filter(project=access.project).order_by("-updated")
    return [_conversation_out(c) async for c in conversations]


@api.get(
    "/conversations/{conversation_id}",
    response=answers(ConversationDetail, 404, 422),
    tags=["chat"],
)
def conversation_detail(request: HttpRequest, conversation_id: int):
    """One conversation with all its messages, tool calls and tool results."""
    conversation, _ = conversation_access(user=request.auth, conversation_id=conversation_id)
    return {
        **_conversation_out(conversation),
        "project_id": conversation.project_id,
        "messages": list(Message.objects.filter(conversation=conversation)),
        "changes": list(FileChange.objects.filter(conversation=conversation)),
        "turns": list(TurnRecord.objects.filter(conversation=conversation)),
        "events": conversation_events(conversation),
    }


@api.post(
    "/conversations/{conversation_id}/approve",
    response=answers(ApprovalOut, 400, 403, 404, 409, 422),
    tags=["chat"],
)
async def conversation_approve(request: HttpRequest, conversation_id: int, payload: ApprovalIn):
    """Approve or deny a tool call that is waiting; only members who may write can decide."""
    conversation, _ = await aconversation_access(
        user=request.auth, conversation_id=conversation_id, write=True
    )
    refused = await turn_relay.turn_approve(
        conversation=conversation, call_id=payload.call, approve=payload.approve
    )
    if refused:
        return _error(request, 409, refused)
    return {"delivered": True}


@api.post(
    "/changes/{change_id}/undo", response=answers(UndoneOut, 400, 403, 404, 422), tags=["changes"]
)
async def change_undo(request: HttpRequest, change_id: int):
    """Undo one change a rojo made, unless the files changed since."""
    change = await FileChange.objects.filter(pk=object_id(change_id, "change")).afirst()
    if change is None:
        raise Http404("No such change.")
    await aproject_access(user=request.auth, project_id=change.project_id, write=True)
    await undo.change_undo(change=change, user=request.auth)
    return {"undone": [change.pk]}


@api.post(
    "/conversations/{conversation_id}/undo-turn",
    response=answers(UndoneOut, 400, 403, 404, 422),
    tags=["changes"],
)
async def turn_undo(request: HttpRequest, conversation_id: int, payload: UndoTurnIn):
    """Undo every change of one turn, newest first; stops at the first that cannot be undone."""
    conversation, _ = await aconversation_access(
        user=request.auth, conversation_id=conversation_id, write=True
    )
    start = await Message.objects.filter(
        conversation=conversation, pk=payload.message, role=Message.Role.USER
    ).afirst()
    if start is None:
        raise Http404("No such message.")
    following = Message.objects.filter(
        conversation=conversation, role=Message.Role.USER, position__gt=start.position
    ).order_by("position")
    end = await following.afirst()
    changes = FileChange.objects.filter(
        conversation=conversation, message__position__gt=start.position
    )
    if end is not None:
        changes = changes.filter(message__position__lt=end.position)
    done = await undo.changes_undo(changes=[c async for c in changes], user=request.auth)
    return {"undone": [c.pk for c in done]}


@api.get(
    "/conversations/{conversation_id}/export", response=answers(None, 400, 404, 422), tags=["chat"]
)
def conversation_export(request: HttpRequest, conversation_id: int, format: str = "json"):
    """Download a conversation: `format=json` (stored messages) or `format=markdown`."""
    conversation, _ = conversation_access(user=request.auth, conversation_id=conversation_id)
    if format == "markdown":
        body = conversation_export_markdown(conversation)
        response = HttpResponse(body, content_type="text/markdown; charset=utf-8")
        extension = "md"
    elif format == "json":
        body = json.dumps(conversation_export_json(conversation), ensure_ascii=False, indent=2)
        response = HttpResponse(body, content_type="application/json")
        extension = "json"
    else:
        return _error(request, 400, "format must be json or markdown")
    response["Content-Disposition"] = (
        f'attachment; filename="conversation-{conversation.pk}.{extension}"'
    )
    return response


def _stream(request: HttpRequest, events) -> StreamingHttpResponse:
    content_type, encode = encoder_for(request.headers.get("Accept", ""))

    async def body():
        # The request is done with the database: let its connection go now, not when the
        # stream ends (SQLite's holds its page cache; a pooled one is back already).
        await sync_to_async(connections.close_all)()
        async for event in events:
            yield encode(event)

    response = StreamingHttpResponse(body(), content_type=content_type)
    response["Cache-Control"] = "no-cache, no-transform"
    response["X-Accel-Buffering"] = "no"
    return response


def _chat_checks(
    user, project_id: int, payload: ChatIn
) -> tuple[ProjectAccess, Rojo, Conversation | None]:
    """(Blocking) The user's access to the project, the rojo, the per-user limits and the
    conversation (of that project) to continue, if any: one trip to the database thread."""
    access = project_access(user=user, project_id=project_id)
    rojo = rojo_get(payload.rojo)
    turns.turn_limits_check(user=user)
    if payload.conversation is None:
        return access, rojo, None
    conversation = Conversation.objects.filter(
        pk=object_id(payload.conversation, "conversation"), project=access.project
    ).first()
    if conversation is None:
        raise Http404("No such conversation.")
    return access, rojo, conversation


@api.post(
    "/projects/{project_id}/chat",
    response=answers(None, 400, 403, 404, 409, 413, 422, 429, 500),
    tags=["chat"],
)
async def chat(request: HttpRequest, project_id: int, payload: ChatIn):
    """Send a message and stream the turn: START, CHAT, TOOL_CALL, TOOL_RESULT, ERROR, DONE.

    Server-sent events by default; NDJSON lines with `Accept: application/x-ndjson`.
    """
    user = request.auth
    access, rojo, conversation = await sync_to_async(_chat_checks)(user, project_id, payload)
    turn = await turns.turn_start(
        access=access, user=user, rojo=rojo, conversation=conversation, message=payload.message
    )
    return _stream(request, turn.follow())


@api.get("/conversations/{conversation_id}/stream", response=answers(None, 404, 422), tags=["chat"])
async def conversation_stream(request: HttpRequest, conversation_id: int, after: int = 0):
    """Re-attach to a conversation's turn: the events after `Last-Event-ID`, then the rest."""
    conversation, _ = await aconversation_access(user=request.auth, conversation_id=conversation_id)
    last_id = request.headers.get("Last-Event-ID", "")
    after = int(last_id) if last_id.isdigit() else after
    turn = turns.turn_get(conversation.pk)
    if turn is not None:
        return _stream(request, turn.follow(after))
    if conversation.running:  # in another server process
        return _stream(request, turn_relay.turn_follow_remote(conversation.pk, after))
    return _stream(request, _nothing_running())


async def _nothing_running():
    yield WireEvent(0, "DONE", {})


@api.post(
    "/conversations/{conversation_id}/stop", response=answers(StopOut, 403, 404, 422), tags=["chat"]
)
async def conversation_stop(request: HttpRequest, conversation_id: int):
    """Stop the conversation's running turn; history is left consistent."""
    conversation, access = await aconversation_access(
        user=request.auth, conversation_id=conversation_id
    )
    if not access.can_write and conversation.user_id != request.auth.pk:
        raise PermissionDenied("Only the person who started it or an editor can stop it.")
    return {"stopping": await turn_relay.turn_stop(conversation=conversation)}
