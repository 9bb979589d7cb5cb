"""A person's decision on a waiting call: who may give it, its delivery, its audit entry."""

from django.core.exceptions import PermissionDenied

from roject.members.access import aproject_role
from roject.models import Role
from rojos.approvals.pending import approval_audit, approval_routed, pending_approval_get
from rojos.models import Conversation
from rojos.turns import control as turn_control

OWNERS_ONLY = "This change waits for an owner of the project to approve it; you cannot decide it."


async def approval_decide(
    *, user, conversation: Conversation, call_id: str, approve: bool, allow_tool: bool = False
) -> str | None:
    """Deliver `user`'s decision on a waiting call to its turn, and audit it once delivered.

    A routed call is decided by an owner only (PermissionDenied for anyone else), and
    `allow_tool` is ignored for a non-owner while the project routes approvals. Returns
    why it was not delivered, as turn_control.turn_approve; raises TurnUnreachable (503)
    when the turn did not confirm.
    """
    pending = await pending_approval_get(conversation=conversation, call_id=call_id)
    routed = pending is not None and pending.routed
    if routed:
        role = await aproject_role(user=user, project_id=conversation.project_id)
        if role != Role.OWNER:
            raise PermissionDenied(OWNERS_ONLY)
    # With routing on, only an owner's "allow for this conversation" is kept: a member
    # who is not an owner cannot make later calls skip the owners.
    if allow_tool and await approval_routed(project_id=conversation.project_id, user=user):
        allow_tool = False
    refused = await turn_control.turn_approve(
        conversation=conversation, call_id=call_id, approve=approve, allow_tool=allow_tool
    )
    if refused is None:
        await approval_audit(
            user=user, conversation=conversation, pending=pending, approved=approve
        )
    return refused
