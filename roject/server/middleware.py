"""Security headers Django 5.2 does not set by itself, and a page's answer when its session
cannot be ended."""

import logging

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.http import HttpResponse

from roject.identity.oidc.config import oidc_form_origins
from roject.identity.sessions import SessionNotEnded

logger = logging.getLogger(__name__)

# Scripts and connections only from this origin: even if model or file text slipped into the
# page as markup, it could not run script. Inline styles stay allowed (the admin uses them).
CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self' 'unsafe-inline'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'self'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)


class ContentSecurityPolicyMiddleware:
    """Adds the Content-Security-Policy header to every response that has none."""

    async_capable = True
    sync_capable = True

    def __init__(self, get_response):
        self.get_response = get_response
        if iscoroutinefunction(get_response):
            markcoroutinefunction(self)

    def __call__(self, request):
        if iscoroutinefunction(self):
            return self._acall(request)
        return self._add_header(self.get_response(request))

    async def _acall(self, request):
        return self._add_header(await self.get_response(request))

    @staticmethod
    def process_exception(request, exception):
        """A session that must end (its user's password changed) while the session cache is
        out of reach: 503, try again, rather than a 500 (only called on a view's error)."""
        if not isinstance(exception, SessionNotEnded):
            return None
        logger.warning("a page refused: %s", exception)
        return HttpResponse(
            "The session store cannot be reached right now. Try again in a moment.",
            status=503,
            content_type="text/plain; charset=utf-8",
            headers={"Retry-After": "5"},
        )

    @staticmethod
    def _add_header(response):
        response.headers.setdefault("Content-Security-Policy", content_security_policy())
        return response


def content_security_policy() -> str:
    """The policy; with single sign-on, form-action also allows the provider's origin: the
    logout form's answer redirects there, and Chromium checks form-action on redirects."""
    origins = oidc_form_origins()
    if not origins:
        return CONTENT_SECURITY_POLICY
    return CONTENT_SECURITY_POLICY.replace(
        "form-action 'self'", " ".join(["form-action 'self'", *origins])
    )
