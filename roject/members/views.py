"""The Members page of a project and the invitation links' page.

Every member sees who is in the project; only owners change anything, and the services
(roject/members/services.py, roject/members/invitations.py) check that again in their
transaction. Each change is a POST form (CSRF) that redirects back to the page, so a reload repeats
nothing; a new invitation's link is kept in the session for that one redirect and shown once.
"""

from functools import wraps

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.contrib.auth.forms import UserCreationForm
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from roject.identity.forms import InvitationForm, MemberAddForm, MemberRoleForm
from roject.members.access import project_access, project_role
from roject.members.invitations import (
    InvitationRefused,
    invitation_accept,
    invitation_create,
    invitation_open,
    invitation_pending_list,
    invitation_revoke,
)
from roject.members.services import (
    MemberError,
    member_add,
    member_list,
    member_remove,
    member_role_set,
)
from roject.models import Role

_MADE = "invitation_made"


def _members_page(request, access, *, status=200, error="", add_form=None, invite_form=None):
    owner = access.role == Role.OWNER
    made = request.session.pop(_MADE, None) if owner else None
    context = {
        "project": access.project,
        "access": access,
        "is_owner": owner,
        "members": member_list(project_id=access.project.pk),
        "invitations": invitation_pending_list(project_id=access.project.pk) if owner else [],
        "made": made if made and made["project"] == access.project.pk else None,
        "roles": Role.choices,
        "error": error,
        "now": timezone.now(),
        "add_form": add_form or MemberAddForm(),
        "invite_form": invite_form or InvitationForm(),
    }
    return render(request, "members.html", context, status=status)


@never_cache
@login_required
def members(request, project_id: int):
    """Who is in the project, with their roles; an owner's forms to change that."""
    access = project_access(user=request.user, project_id=project_id)
    return _members_page(request, access)


def _owner_action(form_class, form_name=None):
    """A POST that changes members: its form checked, its service called, then back to the
    page; a refusal (MemberError) is shown on the page with a 400."""

    def decorate(action):
        @wraps(action)
        @require_POST
        @login_required
        def view(request, project_id: int, **kwargs):
            access = project_access(user=request.user, project_id=project_id)
            form = form_class(request.POST)
            try:
                if not form.is_valid():
                    raise MemberError("Check the form: " + form.errors.as_text())
                done = action(request, project_id, form.cleaned_data, **kwargs)
            except MemberError as exc:
                forms = {form_name: form} if form_name else {}
                return _members_page(request, access, status=400, error=str(exc), **forms)
            messages.success(request, done)
            if project_role(user=request.user, project_id=project_id) is None:
                return redirect("home")  # an owner who removed themselves
            return redirect("members", project_id)

        return view

    return decorate


@_owner_action(MemberAddForm, "add_form")
def member_add_view(request, project_id, data):
    made = member_add(by=request.user, project_id=project_id, who=data["who"], role=data["role"])
    return f"{made.user.get_username()} is now a member ({made.role})."


@_owner_action(MemberRoleForm)
def member_role_view(request, project_id, data, user_id: int):
    changed = member_role_set(
        by=request.user, project_id=project_id, user_id=user_id, role=data["role"]
    )
    return f"{changed.user.get_username()} is now {changed.role}."


@_owner_action(forms.Form)
def member_remove_view(request, project_id, data, user_id: int):
    member_remove(by=request.user, project_id=project_id, user_id=user_id)
    return "The member was removed."


@_owner_action(InvitationForm, "invite_form")
def invitation_create_view(request, project_id, data):
    made = invitation_create(
        by=request.user, project_id=project_id, role=data["role"], email=data["email"]
    )
    link = request.build_absolute_uri(reverse("invitation", args=[made.token]))
    request.session[_MADE] = {"project": made.invitation.project_id, "link": link}
    return "Invitation created. Copy its link now: it is not shown again."


@_owner_action(forms.Form)
def invitation_revoke_view(request, project_id, data, invitation_id: int):
    invitation_revoke(by=request.user, project_id=project_id, invitation_id=invitation_id)
    return "The invitation was revoked."


def _signup_and_accept(request, token: str, form: UserCreationForm):
    """A new account and its membership, in one transaction: a refused link makes no
    account."""
    with transaction.atomic():
        # The invitation's email is the owner's note, never the account's: an address typed
        # by someone else must not let this account be matched as its owner's (SSO, add).
        user = form.save()
        membership = invitation_accept(token=token, user=user)
    login(request, user, backend="roject.identity.backends.PreparedModelBackend")
    return membership


class SignupForm(UserCreationForm):
    """Sign-up on an invitation's page: Django's username validator, and no '@', so a
    username cannot pass for someone's email address (roject/members/services.py: user_find)."""

    def clean_username(self):
        username = super().clean_username()
        if username and "@" in username:
            raise forms.ValidationError("A username cannot contain '@'.")
        return username


@never_cache
def invitation(request, token: str):
    """An invitation link: join with it (logged in), or sign up here first.

    A link that is changed, expired, used or revoked gets a page saying so, with a 4xx,
    and nothing changes.
    """
    signup = SignupForm(request.POST if request.method == "POST" else None)
    try:
        invite = invitation_open(token=token, user=request.user)
        if request.method == "POST":
            if request.user.is_authenticated:
                membership = invitation_accept(token=token, user=request.user)
                return redirect("project", membership.project_id)
            if not settings.ROJO_PASSWORD_LOGIN:
                raise PermissionDenied("Accounts come from single sign-on here: sign in first.")
            if signup.is_valid():
                membership = _signup_and_accept(request, token, signup)
                return redirect("project", membership.project_id)
    except InvitationRefused as refused:
        context = {"refused": refused, "invitation": refused.invitation}
        return render(request, "invitation.html", context, status=refused.status)
    context = {
        "invitation": invite,
        "signup": signup if settings.ROJO_PASSWORD_LOGIN else None,
        "login_next": request.get_full_path(),
    }
    return render(request, "invitation.html", context, status=400 if signup.errors else 200)
