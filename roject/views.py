"""The pages of the projects domain: the project list and the logins (a project's page is
rojos/views.py)."""

from functools import wraps

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.shortcuts import render

from .forms import LoginForm
from .selectors import membership_list


@login_required
def home(request):
    """The projects the user is a member of, with their role in each."""
    return render(request, "home.html", {"memberships": membership_list(user=request.user)})


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


login = _limited(auth_views.LoginView.as_view(authentication_form=LoginForm))


@_limited
def admin_login(request):
    """The admin's login page (its form is roject.forms.AdminLoginForm, see roject/urls.py)."""
    return admin.site.login(request)
