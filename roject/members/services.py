"""Managing a project's members in the app: add, change a role, remove; owners only.

Each service checks, inside its transaction, that `by` is an owner of the project *now*,
with the project's owner rows locked (`owners_locked`), so the last owner can never be
removed or demoted, even by two owners demoting each other at the same moment. A member
who is removed loses the project at once: every page and API call checks membership
(roject/members/access.py) and a running turn ends at its next role check.
"""

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, connection, transaction
from django.http import Http404
from django.utils import timezone

from roject.audit.log import AuditAction, audit_record
from roject.errors import AppError
from roject.members.access import object_id
from roject.models import Invitation, Membership, MembershipRemoval, Project, Role

LAST_OWNER = "A project needs an owner: make someone else an owner first."


class MemberError(AppError):
    """A membership change that cannot be made as asked; the message is for the owner."""


def owners_locked(*, project_id: int) -> set[int]:
    """(Blocking) The user ids of the project's owners, their rows locked until the
    transaction ends.

    PostgreSQL: SELECT … FOR UPDATE; a transaction that waited for the lock re-checks each
    row it then gets, so an owner demoted meanwhile is not in the set. SQLite's transactions
    begin IMMEDIATE (roject/sqlite_backend): they hold the database's write lock already.
    """
    if not connection.in_atomic_block:
        raise RuntimeError("owners are locked in the transaction that changes members")
    # In one order, so two transactions locking the same rows cannot deadlock.
    owners = Membership.objects.filter(project_id=project_id, role=Role.OWNER).order_by("pk")
    if connection.features.has_select_for_update:
        owners = owners.select_for_update()
    return set(owners.values_list("user_id", flat=True))


def owner_check(*, by, project_id) -> tuple[Project, set[int]]:
    """(Blocking, in a transaction) The project and its locked owners, if `by` is one.

    A non-member gets Http404 (the project does not exist for them), a member who is not
    an owner PermissionDenied.
    """
    project_id = object_id(project_id)
    owners = owners_locked(project_id=project_id)
    if by.pk not in owners:
        if not Membership.objects.filter(project_id=project_id, user_id=by.pk).exists():
            raise Http404("No such project.")
        raise PermissionDenied("Only the project's owners manage its members.")
    return Project.objects.get(pk=project_id), owners


def _role(value) -> Role:
    try:
        return Role(value)
    except ValueError:
        raise MemberError(f"{value!r} is not a role: choose viewer, editor or owner.") from None


def user_find(*, who: str):
    """The active user named by `who`: by email alone when it has an '@' (a username that
    looks like an address must not stand in for it), else by username; None if no one.

    MemberError when several users share the address: the owner names one by username.
    """
    who = who.strip()
    users = get_user_model().objects.filter(is_active=True)
    if "@" not in who:
        return users.filter(username=who).first()
    matches = list(users.filter(email__iexact=who)[:2])
    if len(matches) > 1:
        raise MemberError(f"Several users have the email {who!r}: add one by username.")
    return matches[0] if matches else None


def membership_removal_forget(*, user_id, project_id) -> None:
    """(Blocking) An owner gives the membership again: the group mapping may manage it."""
    MembershipRemoval.objects.filter(user_id=user_id, project_id=project_id).delete()


def membership_removal_mark(*, user_id, project_id) -> None:
    """(Blocking) An owner took the member out: the group mapping must not add them back."""
    MembershipRemoval.objects.get_or_create(user_id=user_id, project_id=project_id)


def invitations_revoke_made_by(*, user_id, project_id) -> int:
    """(Blocking) Revoke the pending links `user_id` made in the project: an owner no more,
    their links must not keep letting people in. How many were revoked."""
    pending = Invitation.objects.filter(accepted_at__isnull=True, revoked_at__isnull=True)
    mine = pending.filter(project_id=project_id, created_by_id=user_id)
    return mine.update(revoked_at=timezone.now())


@transaction.atomic
def member_add(*, by, project_id, who: str, role) -> Membership:
    """Make the user named by username or email `who` a member with `role`."""
    project, _owners = owner_check(by=by, project_id=project_id)
    role = _role(role)
    user = user_find(who=who)
    if user is None:
        raise MemberError(
            f"No user has the username or email {who.strip()!r}. "
            "Create an invitation link for someone without an account."
        )
    try:
        with transaction.atomic():
            membership = Membership.objects.create(user=user, project=project, role=role)
    except IntegrityError:
        raise MemberError(f"{user.get_username()} is already a member.") from None
    membership_removal_forget(user_id=user.pk, project_id=project.pk)
    audit_record(
        action=AuditAction.MEMBER_ADDED,
        user=by,
        project=project,
        obj=user,
        details={"role": role.value},
    )
    return membership


def _membership(project: Project, user_id) -> Membership:
    membership = (
        Membership.objects.select_related("user")
        .filter(project=project, user_id=object_id(user_id, "member"))
        .first()
    )
    if membership is None:
        raise Http404("No such member.")
    return membership


@transaction.atomic
def member_role_set(*, by, project_id, user_id, role) -> Membership:
    """Give a member another role; the last owner cannot be demoted."""
    project, owners = owner_check(by=by, project_id=project_id)
    role = _role(role)
    membership = _membership(project, user_id)
    before = Role(membership.role)
    if before == role:
        return membership
    if before == Role.OWNER and owners == {membership.user_id}:
        raise MemberError(LAST_OWNER)
    # An owner's choice: the sign-in's group mapping (roject/identity/oidc/roles.py) no longer
    # manages it.
    Membership.objects.filter(pk=membership.pk).update(role=role, source="")
    membership.role, membership.source = role, ""
    if before == Role.OWNER:
        invitations_revoke_made_by(user_id=membership.user_id, project_id=project.pk)
    audit_record(
        action=AuditAction.MEMBER_ROLE_CHANGED,
        user=by,
        project=project,
        obj=membership.user,
        details={"from": before.value, "to": role.value},
    )
    return membership


@transaction.atomic
def member_remove(*, by, project_id, user_id) -> None:
    """Take a member out of the project (their conversations stay); not the last owner."""
    project, owners = owner_check(by=by, project_id=project_id)
    membership = _membership(project, user_id)
    if membership.role == Role.OWNER and owners == {membership.user_id}:
        raise MemberError(LAST_OWNER)
    membership.delete()
    membership_removal_mark(user_id=membership.user_id, project_id=project.pk)
    if membership.role == Role.OWNER:
        invitations_revoke_made_by(user_id=membership.user_id, project_id=project.pk)
    audit_record(
        action=AuditAction.MEMBER_REMOVED,
        user=by,
        project=project,
        obj=membership.user,
        details={"role": membership.role},
    )


def member_list(*, project_id: int) -> list[Membership]:
    """(Blocking) The project's members with their users: owners first, then by name."""
    order = {Role.OWNER: 0, Role.EDITOR: 1, Role.VIEWER: 2}
    members = Membership.objects.filter(project_id=project_id).select_related("user")
    return sorted(members, key=lambda m: (order[m.role], m.user.get_username().lower()))
