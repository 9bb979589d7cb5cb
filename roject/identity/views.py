"""The pages of the projects domain: the project list and the logins (a project's page is
rojos/web/pages.py)."""

import secrets
from functools import wraps

from django.conf import settings
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import redirect_to_login
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from roject.audit.log import audit_actor
from roject.identity.forms import ApiTokenForm, LimitedPasswordChangeForm, LoginForm
from roject.identity.oidc.config import oidc_enabled
from roject.identity.tokens import TokenError, api_token_create, api_token_list, api_token_revoke
from roject.members.selectors import membership_list


@login_required
def home(request):
    """The projects the user is a member of, with their role in each."""
    return render(request, "home.html", {"memberships": membership_list(user=request.user)})


_FORM_ONCE = "api_token_form_once"


@never_cache
@login_required
def api_tokens(request):
    """The user's personal API tokens; a new one is shown on the answer to its form, once.

    Each form carries a one-time value kept in the session: a reload that posts the form
    again makes no second token and shows none (it is sent back to the list).
    """
    form = ApiTokenForm(request.POST or None)
    made = None
    if request.method == "POST":
        once = request.session.get(_FORM_ONCE, [])
        if request.POST.get("once") not in once:
            return redirect("api_tokens")
        if form.is_valid():
            try:
                made = api_token_create(
                    user=request.user, actor=audit_actor(request), **form.cleaned_data
                )
            except TokenError as exc:
                form.add_error(None, str(exc))
            else:
                once.remove(request.POST["once"])
                form = ApiTokenForm()
    fresh = secrets.token_urlsafe(16)
    request.session[_FORM_ONCE] = [*request.session.get(_FORM_ONCE, [])[-9:], fresh]
    context = {
        "form": form,
        "once": fresh,
        "made": made,
        "tokens": api_token_list(user=request.user),
        "mcp_example": request.build_absolute_uri("/") + "mcp/projects/<project>",
    }
    return render(request, "tokens.html", context)


@require_POST
@login_required
def api_token_revoke_view(request, token_id: int):
    """Revoke one of the user's tokens; another user's is a 404, as a missing one."""
    if not api_token_revoke(user=request.user, token_id=token_id, actor=audit_actor(request)):
        raise Http404("No such token.")
    return redirect("api_tokens")


def _limited(view):
    """A login view whose form refused the attempt (too many failures, limits unreachable)
    answers its page with that status and Retry-After, so scripts can tell too."""

    @wraps(view)
    def wrapper(request, *args, **kwargs):
        response = view(request, *args, **kwargs)
        form = (getattr(response, "context_data", None) or {}).get("form")
        if getattr(form, "retry_after", None):
            response.status_code = form.status
            response["Retry-After"] = str(form.retry_after)
        return response

    return wrapper


class LoginPage(auth_views.LoginView):
    """The password form, the "Sign in with …" button of single sign-on, or both; with
    ROJO_PASSWORD_LOGIN off, a posted password is refused unchecked."""

    authentication_form = LoginForm

    def get_context_data(self, **kwargs):
        return {
            **super().get_context_data(**kwargs),
            "password_login": settings.ROJO_PASSWORD_LOGIN,
            "oidc_enabled": oidc_enabled(),
            "oidc_label": settings.ROJO_OIDC_BUTTON_LABEL,
        }

    def post(self, request, *args, **kwargs):
        if not settings.ROJO_PASSWORD_LOGIN:
            context = self.get_context_data(form=self.get_form_class()(request))
            return self.render_to_response({**context, "password_refused": True}, status=403)
        return super().post(request, *args, **kwargs)


login = _limited(LoginPage.as_view())


@_limited
def admin_login(request):
    """The admin's login page (its form is roject.identity.forms.AdminLoginForm, see
    roject/urls.py); with password login off, the site's login page (single sign-on) instead."""
    if not settings.ROJO_PASSWORD_LOGIN:
        return redirect_to_login(request.GET.get("next") or reverse("admin:index"))
    return admin.site.login(request)


class _AdminPasswordChange(auth_views.PasswordChangeView):
    form_class = LimitedPasswordChangeForm

    def get_form_kwargs(self):
        return {**super().get_form_kwargs(), "request": self.request}


@_limited
def admin_password_change(request):
    """The admin's password change (Django's AdminSite.password_change, whose form checks the
    old password with no limit), its old password counted as a login."""
    request.current_app = admin.site.name
    view = _AdminPasswordChange.as_view(
        success_url=reverse("admin:password_change_done", current_app=admin.site.name),
        extra_context=admin.site.each_context(request),
    )
    return view(request)
