"""The one access check every view, API endpoint, command, tool call and re-run goes through.

Anonymous users must log in; a user who is not a member gets the same 404 as for a project
that does not exist, so project ids reveal nothing; viewers read; editors and owners write
(`Role.can_write`).
"""

from dataclasses import dataclass

from asgiref.sync import sync_to_async
from django.core.exceptions import PermissionDenied
from django.http import Http404

from roject.errors import AppError
from roject.models import Membership, Project, Role
from roject.server.log_format import log_context
from roject.server.prepared_queries import PreparedQuery


class LoginRequired(AppError):
    """The request is anonymous; the web layer answers with a login redirect or a 401."""


@dataclass(frozen=True, slots=True)
class ProjectAccess:
    """A user's verified access to one project."""

    project: Project
    role: Role

    @property
    def can_write(self) -> bool:
        return self.role.can_write


def object_id(value, what: str = "project") -> int:
    """A database id from a URL or payload, or 404: digits only, within a bigint."""
    text = str(value)
    if not (text.isascii() and text.isdigit() and len(text) <= 18):
        raise Http404(f"No such {what}.")
    return int(text)


def _memberships(user, project_id):
    """The user's membership of the project, as a query: at most one row."""
    return Membership.objects.filter(user=user, project_id=object_id(project_id))


# Every request and every tool call of a turn checks one of these (prepared: a tenth of the
# ORM's CPU, roject/server/prepared_queries.py). An account an admin deactivated is no one's
# member: its turn running on stops at its next step or call, as a removed member's does.
def _membership_row(user_id, project_id):
    return Membership.objects.filter(user_id=user_id, project_id=project_id, user__is_active=True)


_ROLE = PreparedQuery(
    lambda *ids: _membership_row(*ids).values_list("role", flat=True)[:1], int, int
)
_MEMBERSHIP = PreparedQuery(
    lambda *ids: _membership_row(*ids).select_related("project")[:1], int, int
)


def project_role(*, user, project_id) -> Role | None:
    """(Blocking) The user's role in the project now, None for a non-member or an inactive
    account; one query.

    For checks made while work runs on someone's behalf (a tool call, a re-run): `user` is
    a user or a user id, and is not checked for being logged in.
    """
    user_id = user if isinstance(user, int) else getattr(user, "pk", None)
    role = None if user_id is None else _ROLE.first(user_id, object_id(project_id))
    return None if role is None else Role(role)


async def astill_member(*, user, project_id) -> bool:
    """Whether the user is active and still a member of the project: one query, for a
    stream checking again, now and then, that whoever opened it may still follow it."""
    return await _memberships(user, project_id).filter(user__is_active=True).aexists()


async def aproject_role(*, user, project_id) -> Role | None:
    """Async twin of project_role."""
    return await sync_to_async(project_role)(user=user, project_id=project_id)


def _access(membership: Membership | None, *, write: bool) -> ProjectAccess:
    """Turn a membership (or its absence) into access, or raise Http404 / PermissionDenied."""
    if membership is None:
        raise Http404("No such project.")
    access = ProjectAccess(project=membership.project, role=Role(membership.role))
    if write and not access.can_write:
        raise PermissionDenied("Your role in this project is read-only.")
    return access


def _logged_in(user) -> None:
    if user is None or not user.is_authenticated:
        raise LoginRequired


def project_access(*, user, project_id, write: bool = False) -> ProjectAccess:
    """The user's access to the project; raises LoginRequired, Http404 or PermissionDenied."""
    _logged_in(user)
    log_context(user_id=user.pk, project_id=project_id)
    membership = _MEMBERSHIP.first(user.pk, object_id(project_id))
    return _access(membership, write=write)


async def aproject_access(*, user, project_id, write: bool = False) -> ProjectAccess:
    """Async twin of project_access, for async views."""
    _logged_in(user)
    log_context(user_id=user.pk, project_id=project_id)
    membership = await sync_to_async(_MEMBERSHIP.first)(user.pk, object_id(project_id))
    return _access(membership, write=write)
