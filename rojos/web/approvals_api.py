"""The owners' Approvals inbox: its entries, a decision on one, and its live count.

Only an owner of an entry's project sees it or decides it; anyone else gets 404, as for an
entry that does not exist. Decisions go through the turn's acknowledged path
(rojos/turns/decisions.py): a turn that did not confirm is a 503, try again.
"""

import logging
import time
from datetime import datetime

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connections
from django.http import HttpRequest, StreamingHttpResponse
from ninja import Field, Router, Schema, Status

from roject.api_answers import answers
from roject.identity.live_auth import live_auth_check
from roject.members.access import LoginRequired
from roject.members.live import sse_event
from rojos.approvals.live import LAYER_ERRORS, approvals_subscribed, live_unavailable
from rojos.approvals.pending import inbox_entry_get, pending_approval_count, pending_approval_list
from rojos.turns.decisions import approval_decide

router = Router(tags=["approvals"])
logger = logging.getLogger(__name__)


class InboxEntryOut(Schema):
    id: int
    project: int
    project_name: str
    conversation: int
    conversation_title: str
    call: str = Field(description="The tool call's id in its conversation.")
    user: str = Field(description="Whose turn it is: the member the call waits for.")
    tool: str
    path: str
    preview: dict = Field(description="What the call would change, as its approval shows it.")
    created: datetime
    expires: datetime = Field(description="Then it counts as denied.")


class DecisionIn(Schema):
    approve: bool


class DecisionOut(Schema):
    delivered: bool


def _user(request: HttpRequest):
    user = request.auth
    if user is None or not user.is_authenticated:
        raise LoginRequired
    return user


@router.get("", response=answers(list[InboxEntryOut]))
async def inbox(request: HttpRequest):
    """The calls waiting for an owner in the projects you own, oldest first."""
    entries = await sync_to_async(pending_approval_list)(user=_user(request))
    return [
        {
            "id": entry.pk,
            "project": entry.project_id,
            "project_name": entry.project.name,
            "conversation": entry.conversation_id,
            "conversation_title": entry.conversation.title,
            "call": entry.call_id,
            "user": entry.user.get_username() if entry.user else "(deleted user)",
            "tool": entry.tool,
            "path": entry.path,
            "preview": entry.preview,
            "created": entry.created,
            "expires": entry.expires,
        }
        for entry in entries
    ]


@router.post("/{approval_id}/decide", response=answers(DecisionOut, 403, 404, 409, 422, 503))
async def inbox_decide(request: HttpRequest, approval_id: int, payload: DecisionIn):
    """Approve or deny a call in your inbox; 503 when its turn did not confirm (try again)."""
    user = _user(request)
    entry = await inbox_entry_get(user=user, approval_id=approval_id)
    refused = await approval_decide(
        user=user, conversation=entry.conversation, call_id=entry.call_id, approve=payload.approve
    )
    if refused:
        return Status(409, {"detail": refused})
    return {"delivered": True}


@router.get("/live", response=answers(None))
async def inbox_live(request: HttpRequest):
    """Server-sent events of your inbox's size: `count {count}` now, then whenever it
    changes (news from any process, or a call expiring: checked every
    ROJO_LIVE_CHECK_SECONDS). It ends, within that interval, once the request is no
    longer signed in: its session logged out or ended, the user inactive, the API token
    it came with revoked or expired (roject/identity/live_auth.py). While the message relay is out
    of reach it sends `ERROR` (code `unavailable`, `retry` in seconds) and ends."""
    user = _user(request)
    signed_in = live_auth_check(request, user=user)

    async def body():
        await sync_to_async(connections.close_all)()  # the stream holds no connection
        every = settings.ROJO_LIVE_CHECK_SECONDS
        try:
            async with approvals_subscribed(user_id=user.pk, every=every) as news:
                shown = await pending_approval_count(user=user)
                yield sse_event({"kind": "count", "data": {"count": shown}})
                checked = time.monotonic()
                async for _ in news:
                    if time.monotonic() - checked >= every:
                        if not await signed_in():
                            return
                        checked = time.monotonic()
                    count = await pending_approval_count(user=user)
                    yield sse_event(
                        {"kind": "count", "data": {"count": count}} if count != shown else None
                    )
                    shown = count
        except LAYER_ERRORS as exc:  # the page is told, and connects again later
            logger.warning("approvals live count of user %s: relay unreachable: %s", user.pk, exc)
            yield sse_event(live_unavailable())

    response = StreamingHttpResponse(body(), content_type="text/event-stream")
    response["Cache-Control"] = "no-cache, no-transform"
    response["X-Accel-Buffering"] = "no"
    return response
