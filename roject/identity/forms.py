"""The login forms, the site's and the admin's, and the admin's password change, with failed
attempts limited (login_limits)."""

from django import forms
from django.contrib.admin.forms import AdminAuthenticationForm, AdminPasswordChangeForm
from django.contrib.auth import authenticate
from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.signals import user_login_failed
from django.views.decorators.debug import sensitive_variables

from roject.identity.login_limits import (
    LoginAttempt,
    LoginLimitsUnavailable,
    LoginLocked,
    login_attempt_start,
)
from roject.models import Role


class CountedAttemptsMixin:
    """A form that checks a password as a login does, counted under the login limits: one
    over them is refused with a form error that says when to try again; `retry_after` is
    then set, in seconds, and `status` is the HTTP status to answer with. Needs `request`."""

    retry_after: int | None = None
    status = 200

    def _attempt_start(self, username: str) -> LoginAttempt:
        """The attempt counted, or a form error saying why it is refused unchecked."""
        try:
            return login_attempt_start(request=self.request, username=username)
        except LoginLocked as refused:
            self.retry_after, self.status = refused.retry_after, 429
            self._refused(username, reason="locked")
            raise forms.ValidationError(str(refused), code="locked") from None
        except LoginLimitsUnavailable as refused:
            self.retry_after, self.status = refused.retry_after, 503
            self._refused(username, reason="limits unavailable")
            raise forms.ValidationError(str(refused), code="unavailable") from None

    def _refused(self, username: str, *, reason: str) -> None:
        """A login refused before its password was checked, or a password checked without
        authenticate (which sends the signal for a wrong password), is a failed login all the
        same."""
        user_login_failed.send(
            sender=__name__, credentials={"username": username}, request=self.request, reason=reason
        )


class LimitedLoginMixin(CountedAttemptsMixin):
    """Counts each login before its password is checked (CountedAttemptsMixin)."""

    @sensitive_variables()
    def clean(self):
        username = self.cleaned_data.get("username")
        password = self.cleaned_data.get("password")
        if username is not None and password:
            attempt = self._attempt_start(username)
            self.user_cache = authenticate(self.request, username=username, password=password)
            if self.user_cache is None:
                raise self.get_invalid_login_error()
            attempt.succeeded()
            self.confirm_login_allowed(self.user_cache)
        return self.cleaned_data


class LoginForm(LimitedLoginMixin, AuthenticationForm):
    """The site's login form."""

    error_messages = {
        **AuthenticationForm.error_messages,
        "invalid_login": "Your username and password did not match. Try again.",
    }


class AdminLoginForm(LimitedLoginMixin, AdminAuthenticationForm):
    """The admin's login form, under the same limits as the site's."""


class LimitedPasswordChangeForm(CountedAttemptsMixin, AdminPasswordChangeForm):
    """The admin's password change, its old password checked as a login is, under the same
    limits: a session someone else holds cannot be used to guess the password."""

    def __init__(self, user, *args, request, **kwargs) -> None:
        self.request = request
        super().__init__(user, *args, **kwargs)

    @sensitive_variables("old_password")
    def clean_old_password(self):
        old_password = self.cleaned_data["old_password"]
        attempt = self._attempt_start(self.user.get_username())
        if not self.user.check_password(old_password):
            # Audited as a failed login (check_password, unlike authenticate, sends nothing).
            self._refused(self.user.get_username(), reason="wrong old password")
            raise forms.ValidationError(
                self.error_messages["password_incorrect"], code="password_incorrect"
            )
        attempt.succeeded()
        return old_password


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
