"""A person's MCP accounts go when they can no longer use them: when they leave their last
project (every rojo, and so every server, can be used in any project) or their account is
deactivated. Memberships and users are `roject`'s, which imports nothing of rojos: these
receivers are connected to its models' signals by rojos' app (`RojosConfig.ready`), so every
way out is covered (an owner's removal, the sign-in's group mapping, the admin, a deleted
project). Each account deleted so is audited as disconnected by the system, with why."""

from django.contrib.auth import get_user_model
from django.db import transaction

from roject.audit.log import AuditAction, audit_record
from roject.models import Membership

from ...models import McpServer
from ..accounts import accounts_of_user_delete


def membership_deleted(sender, instance: Membership, **kwargs) -> None:
    """A membership ended: with no project left, the person's tokens are deleted."""
    user_id = instance.user_id

    def forget() -> None:
        if not Membership.objects.filter(user_id=user_id).exists():
            _forget(user_id=user_id, why="left their last project")

    transaction.on_commit(forget)


def user_saved(sender, instance, **kwargs) -> None:
    """A deactivated person's tokens are deleted (a deleted one's go with the row); rows
    loaded as they are (a fixture, `raw`) are left alone."""
    if not instance.is_active and not kwargs.get("raw"):
        _forget(user_id=instance.pk, why="deactivated", username=instance.get_username())


def _forget(*, user_id: int, why: str, username: str = "") -> None:
    with transaction.atomic():
        servers = accounts_of_user_delete(user_id=user_id)
        if servers and not username:
            person = get_user_model().objects.filter(pk=user_id).first()
            username = person.get_username() if person else ""
        for server_id, slug, name in servers:
            audit_record(
                action=AuditAction.MCP_ACCOUNT_DISCONNECTED,
                object_type=McpServer._meta.label_lower,
                object_id=server_id,
                object_repr=name,
                details={"server": slug, "account": "own", "member": username, "why": why},
            )
