"""Approvals routed to a project's owners, and the record of every approval decision.

With the project's "changes need approval by an owner" on, a call that needs approval in the
turn of a member who is not an owner waits for an owner. Every waiting call is a stored
`PendingApproval` (any process lists it: the owners' inbox and its count read the database,
never a process's memory). A decision goes to the turn through rojos.turns.control's
acknowledged path (rojos/turns/decisions.py) and is audited once delivered; a call that
times out is audited as the system's denial by the approval gate.
"""

from datetime import timedelta

from django.conf import settings
from django.http import Http404
from django.utils import timezone

from roject.audit.log import AuditAction, aaudit_record
from roject.members.access import aproject_role, object_id
from roject.models import Membership, Project, Role
from rojos.approvals.live import approvals_changed_publish
from rojos.models import Conversation, PendingApproval

_NO_APPROVAL = "No such approval."


async def approval_routed(*, project_id: int, user) -> bool:
    """Whether a call in `user`'s turn waits for an owner: the project asks for it and the
    user is not an owner now (a turn without a user, a script's, is never routed)."""
    if user is None:
        return False
    project = Project.objects.filter(pk=project_id, owner_approval=True)
    if not await project.aexists():
        return False
    return await aproject_role(user=user, project_id=project_id) != Role.OWNER


async def pending_approval_add(
    *,
    conversation: Conversation,
    user,
    call_id: str,
    tool: str,
    path: str,
    preview: dict,
    routed: bool,
) -> PendingApproval:
    """Store a waiting call; a routed one tells its project's owners' pages."""
    timeout = settings.ROJO_OWNER_APPROVAL_TIMEOUT if routed else settings.ROJO_APPROVAL_TIMEOUT
    pending, _ = await PendingApproval.objects.aupdate_or_create(
        conversation=conversation,
        call_id=call_id,
        defaults={
            "project_id": conversation.project_id,
            "user_id": getattr(user, "pk", user),
            "tool": tool,
            "path": path[:1000],
            "preview": preview,
            "routed": routed,
            "expires": timezone.now() + timedelta(seconds=timeout),
        },
    )
    if routed:
        await approvals_changed_publish(project_id=conversation.project_id)
    return pending


async def pending_approval_remove(*, pending: PendingApproval) -> None:
    """The call was decided, timed out or its turn ended: it leaves every inbox."""
    await PendingApproval.objects.filter(pk=pending.pk).adelete()
    if pending.routed:
        await approvals_changed_publish(project_id=pending.project_id)


def _inbox(user):
    """Routed calls still waiting, in the projects where `user` is an owner now."""
    owned = Membership.objects.filter(user=user, role=Role.OWNER).values("project_id")
    alive = Conversation.objects.running().values("pk")
    return PendingApproval.objects.filter(
        routed=True,
        project_id__in=owned,
        conversation_id__in=alive,
        expires__gt=timezone.now(),
    )


def pending_approval_list(*, user) -> list[PendingApproval]:
    """(Blocking) The owner's inbox, oldest first, with project, conversation and user."""
    rows = _inbox(user).select_related("project", "conversation", "user")
    return list(rows)


async def pending_approval_count(*, user) -> int:
    """How many calls wait for this owner: the header's count."""
    return await _inbox(user).acount()


def owns_projects(*, user) -> bool:
    """(Blocking) Whether the user owns a project (the header then shows the inbox)."""
    return Membership.objects.filter(user=user, role=Role.OWNER).exists()


async def pending_approval_get(
    *, conversation: Conversation, call_id: str
) -> PendingApproval | None:
    """The stored wait of one call, if it still waits."""
    rows = PendingApproval.objects.filter(conversation=conversation, call_id=call_id)
    return await rows.afirst()


async def approval_audit(
    *,
    user,
    conversation: Conversation,
    pending: PendingApproval | None,
    approved: bool,
    timed_out: bool = False,
) -> None:
    """One audit entry for a decision: a person's, or the system's when none came in time."""
    details = {
        "tool": pending.tool if pending else "",
        "path": pending.path if pending else "",
        "conversation": conversation.pk,
        "routed": bool(pending and pending.routed),
    }
    if timed_out:
        details["timed_out"] = True
    await aaudit_record(
        action=AuditAction.APPROVAL_GRANTED if approved else AuditAction.APPROVAL_DENIED,
        user=user,
        project=conversation.project_id,
        obj=conversation,
        object_repr=conversation.title or f"conversation {conversation.pk}",
        details=details,
    )


async def inbox_entry_get(*, user, approval_id) -> PendingApproval:
    """A routed call in the owner's inbox; 404 for anyone who is not an owner of its project
    (editors, viewers, non-members) and for one no longer waiting."""
    pk = object_id(approval_id, "approval")
    rows = _inbox(user).select_related("conversation").filter(pk=pk)
    pending = await rows.afirst()
    if pending is None:
        raise Http404(_NO_APPROVAL)
    return pending
