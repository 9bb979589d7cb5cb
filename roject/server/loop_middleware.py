"""Django's own middlewares, their hooks run on the event loop where they do no I/O.

Under an ASGI server Django runs every sync hook of a middleware (MiddlewareMixin's
process_request, process_view, process_response) through `sync_to_async`: a trip to a
database thread and back, under the GIL, for setting a header. The stack of settings.py
made 13 such trips per request, about half of what a chat costs besides its stream. Each
class here is Django's class with its hooks called directly on the loop; a hook that may do
I/O (save a modified session, read messages kept in the session, parse a multipart upload,
CSRF tokens kept in the session) still crosses to a database thread, once, and only when it
would. Without a running loop (WSGI, the test Client) they are Django's classes unchanged.

settings.MIDDLEWARE still names Django's classes, as Django's deploy checks (HSTS, secure
cookies, X-Frame-Options) look for them by name: the ASGI handler loads each one's twin here
instead (`loop_twins_loaded`, roject/server/db_threads.py).

A hook that reached the database from the loop would raise SynchronousOnlyOperation: the
tests would see it.
"""

import contextlib
from collections.abc import Iterator

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth import middleware as auth
from django.contrib.messages import middleware as messages
from django.contrib.sessions import middleware as sessions
from django.middleware import clickjacking, common, csrf, security


class _OnTheLoop:
    """process_request and process_response on the loop; `_request_on_thread` and
    `_response_on_thread` say when one must cross to a database thread instead."""

    async def __acall__(self, request):
        response = None
        if hasattr(self, "process_request"):
            response = await self._hook(
                self._request_on_thread(request), self.process_request, request
            )
        response = response or await self.get_response(request)
        if hasattr(self, "process_response"):
            response = await self._hook(
                self._response_on_thread(request), self.process_response, request, response
            )
        return response

    @staticmethod
    async def _hook(on_thread: bool, hook, *args):
        if on_thread:
            return await sync_to_async(hook, thread_sensitive=True)(*args)
        return hook(*args)

    def _request_on_thread(self, request) -> bool:
        return False

    def _response_on_thread(self, request) -> bool:
        return False


class SecurityMiddleware(_OnTheLoop, security.SecurityMiddleware):
    """The HTTPS redirect and the security headers: no I/O."""


class CommonMiddleware(_OnTheLoop, common.CommonMiddleware):
    """Host and slash checks (a URL resolve) and Content-Length: no I/O."""


class XFrameOptionsMiddleware(_OnTheLoop, clickjacking.XFrameOptionsMiddleware):
    """A header: no I/O."""


class AuthenticationMiddleware(_OnTheLoop, auth.AuthenticationMiddleware):
    """Sets the lazy user: read (session and database) only where it is first used."""


class SessionMiddleware(_OnTheLoop, sessions.SessionMiddleware):
    """The request's session, lazy (no I/O); saved after the response on a database thread
    when it was modified (or SESSION_SAVE_EVERY_REQUEST), else its cookie is handled on the
    loop: a session not yet loaded is not read for that."""

    def _response_on_thread(self, request) -> bool:
        session = getattr(request, "session", None)
        if session is None:
            return False
        return session.modified or settings.SESSION_SAVE_EVERY_REQUEST


class MessageMiddleware(_OnTheLoop, messages.MessageMiddleware):
    """The request's message storage (no I/O); after the response, on a database thread
    when the storage has work (messages shown or added) and the session it may fall back
    to is not loaded yet."""

    def _response_on_thread(self, request) -> bool:
        storage = getattr(request, "_messages", None)
        if storage is None or not (storage.used or storage.added_new):
            return False  # update() does nothing
        session = getattr(request, "session", None)
        return session is None or not hasattr(session, "_session_cache")


class CsrfViewMiddleware(_OnTheLoop, csrf.CsrfViewMiddleware):
    """The CSRF checks on the loop; on a database thread with CSRF_USE_SESSIONS (the token
    is in the session), and the view check of a multipart POST (its token is in the form:
    parsing it may write the upload to disk)."""

    def __init__(self, get_response):
        super().__init__(get_response)
        if self.async_mode:  # Django's handler awaits a coroutine function as it is
            self.process_view = self._aprocess_view

    def _request_on_thread(self, request) -> bool:
        return settings.CSRF_USE_SESSIONS

    def _response_on_thread(self, request) -> bool:
        return settings.CSRF_USE_SESSIONS

    async def _aprocess_view(self, request, callback, callback_args, callback_kwargs):
        on_thread = settings.CSRF_USE_SESSIONS or multipart_post(request)
        view = csrf.CsrfViewMiddleware.process_view
        return await self._hook(
            on_thread, view, self, request, callback, callback_args, callback_kwargs
        )


def multipart_post(request) -> bool:
    """Whether reading request.POST parses a multipart body (files, maybe to disk)."""
    return request.method == "POST" and request.content_type == "multipart/form-data"


# Each Django middleware of settings.MIDDLEWARE, and its twin here.
LOOP_TWINS = {
    "django.middleware.security.SecurityMiddleware": SecurityMiddleware,
    "django.contrib.sessions.middleware.SessionMiddleware": SessionMiddleware,
    "django.middleware.common.CommonMiddleware": CommonMiddleware,
    "django.middleware.csrf.CsrfViewMiddleware": CsrfViewMiddleware,
    "django.contrib.auth.middleware.AuthenticationMiddleware": AuthenticationMiddleware,
    "django.contrib.messages.middleware.MessageMiddleware": MessageMiddleware,
    "django.middleware.clickjacking.XFrameOptionsMiddleware": XFrameOptionsMiddleware,
}


@contextlib.contextmanager
def loop_twins_loaded() -> Iterator[None]:
    """settings.MIDDLEWARE with each of Django's middlewares replaced by its twin, while a
    handler loads its stack (once, when the ASGI application is made)."""
    listed = settings.MIDDLEWARE
    settings.MIDDLEWARE = [_dotted(LOOP_TWINS.get(path, path)) for path in listed]
    try:
        yield
    finally:
        settings.MIDDLEWARE = listed


def _dotted(middleware) -> str:
    if isinstance(middleware, str):
        return middleware
    return f"{middleware.__module__}.{middleware.__qualname__}"
