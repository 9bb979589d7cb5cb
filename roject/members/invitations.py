"""Invitation links: how someone without an account (or with one) joins a project.

A link carries a random secret signed with a timestamp (django.core.signing), so a link
that was changed or is older than ROJO_INVITATION_DAYS is refused before the database is
asked. The row stores only the secret's SHA-256 digest (as roject/identity/tokens.py does for API
tokens), its own expiry, and when it was accepted or revoked: a link works once, and an
owner can take it back. Accepting is one conditional UPDATE (WHERE accepted_at IS NULL),
so two people opening the same link at once cannot both join with it.
"""

import hashlib
import secrets
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.core import signing
from django.db import IntegrityError, transaction
from django.http import Http404
from django.utils import timezone

from roject.audit.log import AuditAction, audit_record
from roject.errors import AppError
from roject.members.access import object_id
from roject.members.services import MemberError, membership_removal_forget, owner_check
from roject.models import Invitation, Membership, Role

_SALT = "roject.invitations"


class InvitationRefused(AppError):
    """A link that cannot be used; `status` is the HTTP status its page answers with."""

    def __init__(self, message: str, *, status: int = 410, invitation=None):
        super().__init__(message)
        self.status = status
        self.invitation = invitation


@dataclass(frozen=True, slots=True)
class NewInvitation:
    """An invitation just made: `token` is what its link carries, shown this once."""

    invitation: Invitation
    token: str


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def _days() -> int:
    return max(1, int(settings.ROJO_INVITATION_DAYS))


@transaction.atomic
def invitation_create(*, by, project_id, role, email: str = "") -> NewInvitation:
    """Make an invitation to the project with `role`; only its link's digest is kept."""
    project, _owners = owner_check(by=by, project_id=project_id)
    try:
        role = Role(role)
    except ValueError:
        raise MemberError(f"{role!r} is not a role: choose viewer, editor or owner.") from None
    secret = secrets.token_urlsafe(32)
    invitation = Invitation.objects.create(
        project=project,
        role=role,
        email=email.strip(),
        digest=_digest(secret),
        created_by=by,
        expires=timezone.now() + timedelta(days=_days()),
    )
    audit_record(
        action=AuditAction.INVITATION_CREATED,
        user=by,
        project=project,
        obj=invitation,
        details={"role": role.value, "email": invitation.email},
    )
    token = signing.TimestampSigner(salt=_SALT).sign(secret)
    return NewInvitation(invitation=invitation, token=token)


def invitation_open(*, token: str, user=None) -> Invitation:
    """(Blocking) The invitation a link stands for, if `user` (if given) can accept it.

    InvitationRefused with 404 for a changed or unknown link, 410 for one expired, used or
    revoked, 409 for a user who is a member already. It says no more than that: a link
    reveals nothing of a project to someone who cannot use it.
    """
    try:
        secret = signing.TimestampSigner(salt=_SALT).unsign(token, max_age=timedelta(days=_days()))
    except signing.SignatureExpired:
        raise InvitationRefused("This invitation has expired. Ask for a new one.") from None
    except signing.BadSignature:
        raise InvitationRefused("This invitation link is not valid.", status=404) from None
    invitation = (
        Invitation.objects.select_related("project", "created_by")
        .filter(digest=_digest(secret))
        .first()
    )
    if invitation is None:
        raise InvitationRefused("This invitation link is not valid.", status=404)
    if invitation.revoked_at is not None or not _creator_is_owner(invitation):
        raise InvitationRefused("This invitation was revoked. Ask for a new one.")
    if invitation.accepted_at is not None:
        raise InvitationRefused("This invitation has been used already. Ask for a new one.")
    if invitation.expires <= timezone.now():
        raise InvitationRefused("This invitation has expired. Ask for a new one.")
    is_user = user is not None and user.is_authenticated
    if is_user and Membership.objects.filter(project=invitation.project, user=user).exists():
        raise _already_member(invitation)
    return invitation


def _creator_is_owner(invitation: Invitation) -> bool:
    """A link is an owner's word: it lapses when its maker is no longer an owner, or no
    longer anyone (a deactivated account is no project's member: roject.members.access)."""
    return Membership.objects.filter(
        project_id=invitation.project_id,
        user_id=invitation.created_by_id,
        user__is_active=True,
        role=Role.OWNER,
    ).exists()


def _already_member(invitation: Invitation) -> InvitationRefused:
    return InvitationRefused(
        f"You are a member of {invitation.project.name} already.",
        status=409,
        invitation=invitation,
    )


def invitation_accept(*, token: str, user) -> Membership:
    """(Blocking) Make `user` a member with the invitation's role, using the link up.

    One transaction: the conditional update that uses the link, the membership and the
    audit entry; a user who is a member already leaves the link unused.
    """
    try:
        with transaction.atomic():
            invitation = invitation_open(token=token, user=user)
            now = timezone.now()
            used = Invitation.objects.filter(
                pk=invitation.pk, accepted_at__isnull=True, revoked_at__isnull=True, expires__gt=now
            ).update(accepted_at=now, accepted_by=user)
            if not used:
                raise InvitationRefused("This invitation has been used already. Ask for a new one.")
            membership = Membership.objects.create(
                user=user, project=invitation.project, role=invitation.role
            )
            membership_removal_forget(user_id=user.pk, project_id=invitation.project_id)
            audit_record(
                action=AuditAction.INVITATION_ACCEPTED,
                user=user,
                project=invitation.project,
                obj=invitation,
                details={"role": invitation.role},
            )
    except IntegrityError:  # made a member by an owner meanwhile
        raise _already_member(invitation) from None
    return membership


@transaction.atomic
def invitation_revoke(*, by, project_id, invitation_id) -> None:
    """Take back an invitation not used yet; a used, revoked or other project's is a 404."""
    project, _owners = owner_check(by=by, project_id=project_id)
    pending = Invitation.objects.filter(
        project=project, accepted_at__isnull=True, revoked_at__isnull=True
    )
    invitation = pending.filter(pk=object_id(invitation_id, "invitation")).first()
    if invitation is None or not pending.filter(pk=invitation.pk).update(revoked_at=timezone.now()):
        raise Http404("No such invitation.")
    audit_record(action=AuditAction.INVITATION_REVOKED, user=by, project=project, obj=invitation)


def invitation_pending_list(*, project_id: int) -> list[Invitation]:
    """(Blocking) The project's invitations not used or revoked yet, expired ones included."""
    return list(
        Invitation.objects.filter(
            project_id=project_id, accepted_at__isnull=True, revoked_at__isnull=True
        ).select_related("created_by")
    )
