"""The pages of single sign-on: the start of a sign-in, the provider's callback, and the
logout that ends the provider's session too (RP-initiated logout)."""

import logging

from django.conf import settings
from django.contrib import auth, messages
from django.contrib.auth.signals import user_login_failed
from django.core.exceptions import SuspiciousOperation
from django.http import Http404, HttpResponse, HttpResponseRedirect
from django.shortcuts import redirect, resolve_url
from django.views.decorators.http import require_POST
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from roject.identity.oidc.config import OidcUnavailable, oidc_enabled, oidc_logout_url, oidc_setting
from roject.identity.sessions import SessionNotEnded

logger = logging.getLogger(__name__)

_ID_TOKEN = "oidc_id_token"


def _failed(request, *, reason: str) -> HttpResponseRedirect:
    """Back to the login page with a message; a failed login sent only where Django did not
    send one already (it does when the backend refused)."""
    if reason:
        user_login_failed.send(
            sender=__name__, credentials={"via": "oidc"}, request=request, reason=reason
        )
    messages.error(request, f"Signing in with {settings.ROJO_OIDC_BUTTON_LABEL} failed. Try again.")
    return redirect(settings.LOGIN_URL)


class OidcLoginStart(OIDCAuthenticationRequestView):
    """Sends the browser to the provider's login page (with state, nonce and PKCE)."""

    get_settings = staticmethod(oidc_setting)

    def __init__(self, *args, **kwargs):
        # The parent reads the endpoints here; they are read per request, in `get`.
        super(OIDCAuthenticationRequestView, self).__init__(*args, **kwargs)

    def get(self, request):
        if not oidc_enabled():
            raise Http404("Single sign-on is not configured.")
        try:
            self.OIDC_OP_AUTH_ENDPOINT = oidc_setting("OIDC_OP_AUTHORIZATION_ENDPOINT")
        except OidcUnavailable as exc:
            logger.warning("OIDC sign-in cannot start: %s", exc)
            messages.error(
                request,
                f"{settings.ROJO_OIDC_BUTTON_LABEL} cannot be reached right now. Try again later.",
            )
            return redirect(settings.LOGIN_URL)
        self.OIDC_RP_CLIENT_ID = settings.ROJO_OIDC_CLIENT_ID
        return super().get(request)


class OidcCallback(OIDCAuthenticationCallbackView):
    """The provider's answer: logs the user in, or back to the login page, audited."""

    get_settings = staticmethod(oidc_setting)

    def get(self, request):
        if not oidc_enabled():
            raise Http404("Single sign-on is not configured.")
        try:
            return super().get(request)
        except SuspiciousOperation:  # a state this browser's session never started
            return _failed(request, reason="unknown state")

    def login_failure(self):
        if not hasattr(self, "user"):
            reason = "provider error" if self.request.GET.get("error") else "no sign-in started"
        elif self.user is not None:
            reason = "inactive account"
        else:
            reason = ""  # the backend refused, and Django sent user_login_failed
        return _failed(self.request, reason=reason)


@require_POST
def logout(request):
    """End the app's session and, for a user signed in with the provider, the provider's
    session too: the answer sends the browser to its end_session_endpoint.

    A session whose cached copy cannot be deleted now (roject/identity/sessions.py) is not ended,
    and the answer says so (503): a logout is not pretended."""
    try:
        cached_copy_delete = getattr(request.session, "cached_copy_delete", None)
        if cached_copy_delete is not None:
            cached_copy_delete()
    except SessionNotEnded as exc:
        logger.warning("logout refused: %s", exc)
        return HttpResponse(
            "You are still logged in: the session store cannot be reached right now, so "
            "this session could not be ended. Try again in a moment.",
            status=503,
            content_type="text/plain; charset=utf-8",
            headers={"Retry-After": "5"},
        )
    target = None
    id_token = request.session.get(_ID_TOKEN)
    if oidc_enabled() and id_token:
        target = oidc_logout_url(request, id_token=id_token)
    auth.logout(request)
    return HttpResponseRedirect(target or resolve_url(settings.LOGOUT_REDIRECT_URL))
