"""A person's MCP accounts go when they can no longer use them: when they leave their last
project (every rojo, and so every server, can be used in any project) or their account is
deactivated. Memberships and users are `roject`'s, which imports nothing of rojos: these
receivers are connected to its models' signals by rojos' app (`RojosConfig.ready`), so every
way out is covered (an owner's removal, the sign-in's group mapping, the admin, a deleted
project). Each account deleted so is audited as disconnected by the system, with why.

A server's accounts go too when an admin moves it (`server_moved`): tokens issued for one
server are sent to no other, as a rojo's stored key never follows its base URL to another
host (`endpoint_moved`); the admin's change entry counts them."""

from django.contrib.auth import get_user_model
from django.db import transaction

from roject.audit.log import AuditAction, audit_record
from roject.models import Membership

from ...models import McpServer
from ...models.key_sources import endpoint_moved
from ..accounts import accounts_of_server_delete, accounts_of_user_delete
from ..pool import mcp_account_sessions_stop
from ..spec import ServerSpec
from .pending import pending_of_server_delete


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
    """Delete the person's accounts, audited; once committed, this process's sessions that
    sign in as them stop (as a Disconnect's do)."""
    with transaction.atomic():
        servers = accounts_of_user_delete(user_id=user_id)
        slugs = [slug for _server_id, slug, _name in servers]
        transaction.on_commit(lambda: _sessions_stop(slugs, user_id))
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


def _sessions_stop(slugs: list[str], user_id: int) -> None:
    for slug in slugs:
        mcp_account_sessions_stop(slug, user_id)


def server_moved(*, before: McpServer, after: McpServer) -> bool:
    """Whether a change leaves the server's accounts without the server they were issued
    for: its URL moved to another scheme, host or port, or how it signs in changed."""
    if ServerSpec.of(before).sign_in != ServerSpec.of(after).sign_in:
        return True
    return endpoint_moved(before.url, after.url)


def server_accounts_forget(*, server_id: int, slug: str) -> int:
    """(Blocking) Delete every account on the server (members' and the shared one) and every
    sign-in under way to it; once committed, this process's sessions of it (by `slug`, as
    they were started) stop. How many accounts went."""
    with transaction.atomic():
        removed = accounts_of_server_delete(server_id=server_id)
        pending_of_server_delete(server_id=server_id)
    transaction.on_commit(lambda: mcp_account_sessions_stop(slug, None))
    return removed
