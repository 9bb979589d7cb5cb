"""What the header of every page needs beyond the user: whether to show the Approvals inbox."""

from roject.models import Membership, Role


def header(request) -> dict:
    """`header_owner`: whether the user owns a project (read only if the page asks: a call)."""

    def owner() -> bool:
        user = getattr(request, "user", None)
        if user is None or not user.is_authenticated:
            return False
        return Membership.objects.filter(user=user, role=Role.OWNER).exists()

    return {"header_owner": owner}
