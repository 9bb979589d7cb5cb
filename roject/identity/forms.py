"""The login forms, the site's and the admin's, with failed logins limited (login_limits)."""

from django import forms
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth import authenticate
from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.signals import user_login_failed
from django.views.decorators.debug import sensitive_variables

from roject.identity.login_limits import LoginLimitsUnavailable, LoginLocked, login_attempt_start
from roject.models import Role


class LimitedLoginMixin:
    """Counts each login before its password is checked, and refuses one over the limits
    with a form error that says when to try again; `retry_after` is then set, in seconds,
    and `status` is the HTTP status to answer with."""

    retry_after: int | None = None
    status = 200

    @sensitive_variables()
    def clean(self):
        username = self.cleaned_data.get("username")
        password = self.cleaned_data.get("password")
        if username is not None and password:
            try:
                attempt = login_attempt_start(request=self.request, username=username)
            except LoginLocked as refused:
                self.retry_after, self.status = refused.retry_after, 429
                self._refused(username, reason="locked")
                raise forms.ValidationError(str(refused), code="locked") from None
            except LoginLimitsUnavailable as refused:
                self.retry_after, self.status = refused.retry_after, 503
                self._refused(username, reason="limits unavailable")
                raise forms.ValidationError(str(refused), code="unavailable") from None
            self.user_cache = authenticate(self.request, username=username, password=password)
            if self.user_cache is None:
                raise self.get_invalid_login_error()
            attempt.succeeded()
            self.confirm_login_allowed(self.user_cache)
        return self.cleaned_data

    def _refused(self, username: str, *, reason: str) -> None:
        """A login refused before its password was checked is a failed login all the same
        (authenticate, which sends the signal for a wrong password, was not called)."""
        user_login_failed.send(
            sender=__name__, credentials={"username": username}, request=self.request, reason=reason
        )


class LoginForm(LimitedLoginMixin, AuthenticationForm):
    """The site's login form."""

    error_messages = {
        **AuthenticationForm.error_messages,
        "invalid_login": "Your username and password did not match. Try again.",
    }


class AdminLoginForm(LimitedLoginMixin, AdminAuthenticationForm):
    """The admin's login form, under the same limits as the site's."""


class ApiTokenForm(forms.Form):
    """A new personal API token: what it is for, when it expires, whether it may write."""

    EXPIRY_CHOICES = [
        ("", "Never"),
        ("7", "In 7 days"),
        ("30", "In 30 days"),
        ("90", "In 90 days"),
        ("365", "In a year"),
    ]

    name = forms.CharField(max_length=100, help_text="What the token is for, e.g. “laptop”.")
    expires_days = forms.TypedChoiceField(
        label="Expires", choices=EXPIRY_CHOICES, coerce=int, empty_value=None, required=False
    )
    read_only = forms.BooleanField(
        required=False, label="Read-only", help_text="The token can read files, never change them."
    )


class MemberAddForm(forms.Form):
    """A member to add, by username or email, with a role."""

    who = forms.CharField(label="Username or email", max_length=254)
    role = forms.ChoiceField(choices=Role.choices, initial=Role.VIEWER)


class MemberRoleForm(forms.Form):
    """A member's new role."""

    role = forms.ChoiceField(choices=Role.choices)


class InvitationForm(forms.Form):
    """An invitation link: the role it gives and, optionally, who it is for."""

    role = forms.ChoiceField(choices=Role.choices, initial=Role.VIEWER)
    email = forms.EmailField(
        required=False, label="Email (optional)", help_text="A note of who it is for."
    )
