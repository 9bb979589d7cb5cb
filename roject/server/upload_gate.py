"""Who may upload is decided from the request's headers, before one byte of its body is read.

Django's ASGI handler reads a whole body (to disk past FILE_UPLOAD_MAX_MEMORY_SIZE) before
any middleware or view runs, so an upload's 401, 403 or 404 used to come only once a client
had sent, and the server stored, all of it: anyone, logged out, could fill the temporary
disk. This gate asks first. It runs the request through Django with its headers and an
empty body: the same middleware, the API's token or session auth and CSRF check, and the
upload view's own access check (roject/members/access.py), which, once they pass, answers "go ahead"
(`upload_preflight`) instead of reading anything. Whoever is refused gets that answer at
once and the connection is closed, the body unread (`Connection: close`, so the server does
not drain it either); whoever may upload has the request handed on to Django as usual,
where every check runs again and the body's limits and stall time are kept on the wire
(roject/server/upload_guard.py).

Uploads under way are bounded per process (counted on its event loop): per client address
(as the login limits count it), decisions included, ROJO_UPLOAD_MAX_IN_FLIGHT_PER_ADDRESS,
and per user ROJO_UPLOAD_MAX_IN_FLIGHT; over either, 429 at once, the body unread.
"""

import io

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core import signals
from django.http import HttpRequest, HttpResponse

from roject.identity.login_limits import client_address
from roject.server.db_threads import db_context
from roject.server.upload_guard import is_upload, refuse

_PREFLIGHT = "rojo.upload_preflight"  # set in the scope of the gate's own request only


class _GoAhead(HttpResponse):
    """The upload view's answer to the gate: every check passed, for this user."""

    def __init__(self, user_id: int) -> None:
        super().__init__(status=204)
        self.user_id = user_id


def upload_preflight(request: HttpRequest) -> HttpResponse | None:
    """For the upload view, once its checks have passed: the answer to the gate's question
    (go ahead), or None for the upload itself, whose body the view then reads."""
    if not getattr(request, "scope", {}).get(_PREFLIGHT):
        return None
    return _GoAhead(request.auth.pk)


class InFlight:
    """How many requests are under way per key, each key bounded. Only the event loop's
    thread counts, so taking a place needs no lock."""

    def __init__(self) -> None:
        self._counts: dict = {}

    def take(self, key, bound: int) -> bool:
        """Count one more for `key`, unless `bound` (0: none) is reached."""
        count = self._counts.get(key, 0)
        if bound and count >= bound:
            return False
        self._counts[key] = count + 1
        return True

    def give(self, key) -> None:
        """Count one less for `key`."""
        left = self._counts[key] - 1
        if left:
            self._counts[key] = left
        else:
            del self._counts[key]


_by_address = InFlight()
_by_user = InFlight()


async def _too_many(send, whose: str) -> None:
    await refuse(
        send,
        429,
        f"Too many uploads are under way from {whose}; try again when one has finished.",
        headers=[(b"retry-after", b"5")],
    )


class UploadGate:
    """ASGI middleware: uploads decided from their headers, and bounded in flight."""

    def __init__(self, app, django_handler) -> None:
        self.app = app
        self.django = django_handler

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or not is_upload(scope):
            return await self.app(scope, receive, send)
        request, error = self.django.create_request({**scope, _PREFLIGHT: True}, io.BytesIO())
        if request is None:
            return await self._answer(error, send)
        address = client_address(request)
        if not _by_address.take(address, settings.ROJO_UPLOAD_MAX_IN_FLIGHT_PER_ADDRESS):
            return await _too_many(send, "this address")
        try:
            answer = await self._ask(request)
            if not isinstance(answer, _GoAhead):
                return await self._answer(answer, send)
            user = answer.user_id
            if not _by_user.take(user, settings.ROJO_UPLOAD_MAX_IN_FLIGHT):
                return await _too_many(send, "you")
            try:
                await self.app(scope, receive, send)
            finally:
                _by_user.give(user)
        finally:
            _by_address.give(address)

    async def _ask(self, request: HttpRequest) -> HttpResponse:
        """What Django answers the request with no body: `_GoAhead` or a refusal."""
        async with db_context():
            await signals.request_started.asend(sender=type(self.django), scope=request.scope)
            response = await self.django.get_response_async(request)
            if isinstance(response, _GoAhead):
                await sync_to_async(response.close)()  # request_finished, as after any request
        return response

    async def _answer(self, response: HttpResponse, send) -> None:
        """Send Django's refusal and close the connection, the body unread."""
        response["Connection"] = "close"
        async with db_context():
            await self.django.send_response(response, send)
            await sync_to_async(response.close)()
