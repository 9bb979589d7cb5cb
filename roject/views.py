"""The pages of the projects domain: the project list (a project's page is rojos/views.py)."""

from django.contrib.auth.decorators import login_required
from django.shortcuts import render

from .selectors import membership_list


@login_required
def home(request):
    """The projects the user is a member of, with their role in each."""
    return render(request, "home.html", {"memberships": membership_list(user=request.user)})
