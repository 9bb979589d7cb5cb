"""Reading the projects domain: what a user is a member of."""

from django.db.models import QuerySet

from roject.models import Membership


def membership_list(*, user) -> QuerySet[Membership]:
    """The user's memberships with their projects, by project name."""
    return Membership.objects.filter(user=user).select_related("project").order_by("project__name")


def membership_project_ids(*, user) -> list[int]:
    """(Blocking) The ids of the projects the user is a member of."""
    return list(Membership.objects.filter(user=user).values_list("project_id", flat=True))


def membership_any(*, user) -> bool:
    """(Blocking) Whether the user is active and a member of some project: what it takes to
    chat with a rojo (any rojo, in any project) or to use an MCP server."""
    return Membership.objects.filter(user=user, user__is_active=True).exists()
