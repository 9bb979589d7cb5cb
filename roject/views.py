from django.contrib.auth.decorators import login_required
from django.shortcuts import render

from .models import Membership


@login_required
def home(request):
    """The projects the user is a member of, with their role in each."""
    memberships = (
        Membership.objects.filter(user=request.user)
        .select_related("project")
        .order_by("project__name")
    )
    return render(request, "home.html", {"memberships": memberships})
