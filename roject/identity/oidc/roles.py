"""Project roles from the sign-in provider's groups (ROJO_OIDC_GROUP_ROLES), set at each login.

The mapping owns only the memberships it gave (source "oidc"): it adds them, changes their
role and removes them when the user leaves the group. A membership given in the app is
left as it is, whatever the groups say: an owner's choice is not undone by a login, nor is
an owner's removal (a MembershipRemoval row, until an owner adds the user again). Nor is
a project left without an owner: its last owner keeps the membership (logged), under the
lock of the project's owner rows that the Members page takes (roject/members/services.py), so two
last owners signing in at once cannot both lose the role.
"""

import logging

from django.conf import settings
from django.db import transaction

from roject.audit.log import AuditAction, audit_record
from roject.members.services import invitations_revoke_made_by, owners_locked
from roject.models import Membership, MembershipRemoval, MembershipSource, Project, Role

logger = logging.getLogger(__name__)

_RANK = {Role.VIEWER: 1, Role.EDITOR: 2, Role.OWNER: 3}


def _wanted_roles(groups: set[str]) -> tuple[set[str], dict[str, str]]:
    """(every mapped project slug, the highest role the user's groups give in each)."""
    mapped: set[str] = set()
    wanted: dict[str, str] = {}
    for group, slug, role in settings.ROJO_OIDC_GROUP_ROLES:
        mapped.add(slug)
        if group in groups and _RANK[Role(role)] > _RANK.get(wanted.get(slug), 0):
            wanted[slug] = role
    return mapped, wanted


def membership_sync_from_groups(*, user, groups: set[str], address: str | None) -> None:
    """Set the user's memberships in the mapped projects from `groups`, each change audited."""
    mapped, wanted = _wanted_roles(groups)
    if not mapped:
        return
    projects = {project.slug: project for project in Project.objects.filter(slug__in=mapped)}
    for slug in sorted(mapped - projects.keys()):
        logger.warning("ROJO_OIDC_GROUP_ROLES names a project that does not exist: %r", slug)
    with transaction.atomic():
        # The owner rows first, project by project in one order (as the Members page
        # locks them, before any other row), then the user's own.
        owners = {
            project.pk: owners_locked(project_id=project.pk)
            for project in sorted(projects.values(), key=lambda project: project.pk)
        }
        held = {
            membership.project_id: membership
            for membership in Membership.objects.select_for_update().filter(
                user=user, project__in=projects.values()
            )
        }
        for slug, project in sorted(projects.items()):
            _membership_set(
                user=user,
                project=project,
                membership=held.get(project.pk),
                role=wanted.get(slug),
                address=address,
                owners=owners[project.pk],
            )


def _membership_set(
    *, user, project, membership, role: str | None, address, owners: set[int]
) -> None:
    """Bring one project's membership to `role` (None: none), if the mapping owns it;
    `owners` are the project's owners, their rows locked."""
    # The system acts (at the user's login, from the provider's word), not the user.
    audit = {"project": project, "address": address}
    if membership is None:
        removed = MembershipRemoval.objects.filter(user=user, project=project).exists()
        if role is not None and not removed:  # an owner's removal stands
            membership = Membership.objects.create(
                user=user, project=project, role=role, source=MembershipSource.OIDC
            )
            audit_record(
                action=AuditAction.MEMBER_ADDED,
                obj=membership,
                details={"via": "oidc", "member": user.get_username(), "role": role},
                **audit,
            )
        return
    if membership.source != MembershipSource.OIDC or membership.role == role:
        return
    if membership.role == Role.OWNER and owners == {membership.user_id}:
        logger.warning("%s stays the last owner of %s despite their groups", user, project)
        return
    if membership.role == Role.OWNER:  # no longer an owner: their links lapse
        invitations_revoke_made_by(user_id=user.pk, project_id=project.pk)
    if role is None:
        audit_record(
            action=AuditAction.MEMBER_REMOVED,
            obj=membership,
            details={"via": "oidc", "member": user.get_username(), "role": membership.role},
            **audit,
        )
        membership.delete()
        return
    details = {"via": "oidc", "member": user.get_username(), "from": membership.role, "to": role}
    membership.role = role
    membership.save(update_fields=["role"])
    audit_record(action=AuditAction.MEMBER_ROLE_CHANGED, obj=membership, details=details, **audit)
