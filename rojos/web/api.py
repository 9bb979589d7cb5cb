"""The JSON API and the chat stream: thin endpoints that check access, call a selector or a
service, encode. Errors are answered in rojos/web/errors.py, schemas are in rojos/web/schemas.py."""

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest
from ninja import NinjaAPI, Status, Swagger

from roject.api_answers import answers
from roject.audit.log import audit_actor
from roject.files_api import router as files_router
from roject.identity.live_auth import checked_stream, live_access_check
from roject.identity.token_auth import session_auth, token_auth
from roject.members.selectors import membership_list
from roject.server.direct_writes import DirectStream
from rojos.changes import undo
from rojos.conversations.search import conversation_search
from rojos.turns import control as turn_control
from rojos.turns import relay as turn_relay
from rojos.turns.admission import start_admit
from rojos.turns.decisions import approval_decide
from rojos.turns.ended_events import interrupted_events, stored_turn_events
from rojos.turns.reattach import turn_reattach_plan
from rojos.turns.repair import dead_turn_end
from rojos.turns.start import turn_start
from rojos.web import selectors
from rojos.web.approvals_api import router as approvals_router
from rojos.web.attached import chat_attachments
from rojos.web.chat_admission import chat_signed_in, chat_slot
from rojos.web.chat_schemas import ChatIn
from rojos.web.conversations_api import router as conversations_router
from rojos.web.errors import error_handlers_add
from rojos.web.event_streams import event_stream, events_alone, events_listed
from rojos.web.files_api import router as file_edits_router
from rojos.web.images_api import router as images_router
from rojos.web.json_bodies import JsonBodies
from rojos.web.models_api import router as models_router
from rojos.web.pdfs_api import router as pdfs_router
from rojos.web.questions_api import router as questions_router
from rojos.web.schemas import (
    ApprovalIn,
    ApprovalOut,
    ChangeDiffOut,
    ProjectOut,
    RojoOut,
    SearchHitOut,
    StopOut,
    UndoneOut,
    UndoTurnIn,
)
from rojos.web.selftest_api import router as selftest_router

# The docs page and its schema are for logged-in users, like the rest of the API. Swagger UI
# comes from ninja's own static files (ninja is in INSTALLED_APPS), never a CDN, and starts
# from a file, not an inline script, so it runs under the app's CSP; no validator badge,
# which would load an image from swagger.io.
api = NinjaAPI(
    title="Rojo Chat API",
    version="1",
    # A bearer token first (scripts, outside agents), else the browser's session and CSRF.
    auth=[token_auth, session_auth],
    urls_namespace="api",
    parser=JsonBodies(),
    docs=Swagger(settings={"validatorUrl": None}),
    docs_decorator=login_required,
)
api.add_router("/projects", files_router)
api.add_router("/projects", file_edits_router)
api.add_router("/projects", images_router)
api.add_router("/projects", pdfs_router)
api.add_router("", conversations_router)
api.add_router("", models_router)
api.add_router("/approvals", approvals_router)
api.add_router("", questions_router)
api.add_router("/rojos", selftest_router)
error_handlers_add(api)


@api.get("/projects", response=answers(list[ProjectOut]), tags=["projects"])
def project_list(request: HttpRequest):
    """The projects you are a member of, with your role."""
    return [
        {"id": m.project.pk, "name": m.project.name, "slug": m.project.slug, "role": m.role}
        for m in membership_list(user=request.auth)
    ]


@api.get("/rojos", response=answers(list[RojoOut]), tags=["rojos"])
def rojo_list(request: HttpRequest):
    """The rojos you can chat with (their keys are never included)."""
    return list(selectors.rojo_list())


@api.get("/search", response=answers(list[SearchHitOut], 422), tags=["chat"])
def search(request: HttpRequest, q: str = "", project: int | None = None):
    """Conversations whose title, and messages whose text, contain every word of `q`, in
    your projects (or one of them): the database's full-text index, the last word a prefix."""
    return conversation_search(user=request.auth, query=q[:500], project_id=project)


@api.post(
    "/conversations/{conversation_id}/approve",
    response=answers(ApprovalOut, 400, 403, 404, 409, 422),
    tags=["chat"],
)
async def conversation_approve(request: HttpRequest, conversation_id: int, payload: ApprovalIn):
    """Approve or deny a tool call that is waiting; only members who may write can decide,
    and only owners a call that waits for an owner (403 for anyone else)."""
    conversation, _ = await selectors.aconversation_access(
        user=request.auth, conversation_id=conversation_id, write=True
    )
    refused = await approval_decide(
        user=request.auth,
        conversation=conversation,
        call_id=payload.call,
        approve=payload.approve,
        allow_tool=payload.allow_for_conversation,
    )
    if refused:
        return Status(409, {"detail": refused})
    return {"delivered": True}


@api.get("/changes/{change_id}/diff", response=answers(ChangeDiffOut, 404, 422), tags=["changes"])
async def change_diff(request: HttpRequest, change_id: int):
    """What a change did to its paths' text, as unified diffs (kept when it ran), for its
    activity line; empty for a change that kept none (no small text)."""
    change, _ = await selectors.achange_access(user=request.auth, change_id=change_id)
    return {"diff": "".join(change.diffs or ())}


@api.post(
    "/changes/{change_id}/undo", response=answers(UndoneOut, 400, 403, 404, 422), tags=["changes"]
)
async def change_undo(request: HttpRequest, change_id: int):
    """Undo one change a rojo made, unless the files changed since."""
    change, _ = await selectors.achange_access(user=request.auth, change_id=change_id, write=True)
    await undo.change_undo(
        change=change, user=request.auth, actor=audit_actor(request, user=request.auth)
    )
    return {"undone": [change.pk]}


@api.post(
    "/conversations/{conversation_id}/undo-turn",
    response=answers(UndoneOut, 400, 403, 404, 422),
    tags=["changes"],
)
async def turn_undo(request: HttpRequest, conversation_id: int, payload: UndoTurnIn):
    """Undo every change of one turn, newest first; stops at the first that cannot be undone."""
    conversation, _ = await selectors.aconversation_access(
        user=request.auth, conversation_id=conversation_id, write=True
    )
    changes = await sync_to_async(selectors.turn_changes_list)(
        conversation=conversation, message_id=payload.message
    )
    done = await undo.changes_undo(
        changes=changes, user=request.auth, actor=audit_actor(request, user=request.auth)
    )
    return {"undone": [c.pk for c in done]}


def _signed_in_with(request: HttpRequest) -> dict:
    """What a turn checks again as it runs: the API token the chat came with, else its login
    session (rojos.agent.tool_calls)."""
    token = getattr(request, "api_token", None)
    if token is not None:
        return {"token_id": token.pk}
    return {"session_key": request.session.session_key}


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
    # Starts go a few at a time, in order (rojos.turns.admission): the place is taken before
    # Django's request path (rojos.web.chat_admission), else here.
    admission = chat_slot(request.scope) or await start_admit()
    try:
        checked = await sync_to_async(selectors.chat_context_get)(
            user=user,
            project_id=project_id,
            rojo=payload.rojo,
            conversation_id=payload.conversation,
            model=payload.model,
        )
        chat_signed_in(request.scope)  # its next chats take their places before Django's path
        attachments = await chat_attachments(checked=checked, payload=payload)
        turn = await turn_start(
            access=checked.access,
            user=user,
            rojo=checked.rojo,
            conversation=checked.conversation,
            message=payload.message,
            replace=payload.replace,
            attachments=attachments,
            admission=admission,
            budgets=checked.budgets,
            client_key=payload.key,
            model=payload.model,
            **_signed_in_with(request),
        )
    except BaseException:
        admission.release_unless_handed()
        raise
    return event_stream(request, turn=turn)


@api.get("/conversations/{conversation_id}/stream", response=answers(None, 404, 422), tags=["chat"])
async def conversation_stream(
    request: HttpRequest, conversation_id: int, after: int = 0, turn: int | None = None
):
    """Re-attach to a conversation's turn: the events after `Last-Event-ID`, then the rest.

    `turn` names the turn those events were of (the `message` of its START): when the
    conversation has gone on to another turn, that one comes whole, from its START (numbered
    1). Without it, `after` is taken as counted in the current turn. Any member may follow
    any turn of the project, so the stream ends, within ROJO_LIVE_CHECK_SECONDS, once the
    follower may no longer read it: removed, inactive, signed out, or its API token revoked
    (checked again as events go out)."""
    conversation, _ = await selectors.aconversation_access(
        user=request.auth, conversation_id=conversation_id
    )
    last_id = request.headers.get("Last-Event-ID", "")
    after = int(last_id) if last_id.isascii() and last_id.isdigit() else after
    allowed = live_access_check(request, user=request.auth, project_id=conversation.project_id)

    def followed(events) -> DirectStream:
        every = settings.ROJO_LIVE_CHECK_SECONDS
        return event_stream(request, checked_stream(events, allowed=allowed, every=every))

    plan = await turn_reattach_plan(conversation_id=conversation.pk, after=after, turn=turn)
    if plan.local is not None:
        return followed(plan.local.follow_batches(plan.after))
    if await dead_turn_end(conversation):  # its process is gone: ended now
        if plan.after:
            return event_stream(request, events_listed(interrupted_events(plan.after)))
    elif conversation.running:  # in another server process
        remote = turn_relay.turn_follow_remote(conversation.pk, plan.after, turn=plan.current)
        return followed(events_alone(remote))
    # Finished, its live log elsewhere or gone: the stored turn, from its START.
    return event_stream(request, events_listed(await stored_turn_events(conversation)))


@api.post(
    "/conversations/{conversation_id}/stop",
    response=answers(StopOut, 403, 404, 422),
    tags=["chat"],
)
async def conversation_stop(request: HttpRequest, conversation_id: int):
    """Stop the conversation's running turn; history is left consistent."""
    conversation, access = await selectors.aconversation_access(
        user=request.auth, conversation_id=conversation_id
    )
    selectors.conversation_steer_check(conversation=conversation, access=access, user=request.auth)
    return {"stopping": await turn_control.turn_stop(conversation=conversation)}
