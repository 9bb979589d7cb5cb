"""The app's own static files handler: Django's, with every path that is not plainly inside
the static directories answered 404 before it reaches a finder; and /favicon.ico, sent there.

Django's handler decodes the URL's path once more after the server has (`url2pathname`), so
`%252e%252e` arrives as `..`; its finders then refuse a path that leaves their directory with
SuspiciousFileOperation, which the handler does not catch: the server answered 500 and
logged a traceback holding the server's paths. Here each segment of the decoded path must be
a plain name.
"""

from asgiref.sync import sync_to_async
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler
from django.core.exceptions import SuspiciousOperation
from django.core.handlers.exception import response_for_exception
from django.http import Http404, HttpResponseRedirect
from django.templatetags.static import static


class StaticFilesHandler(ASGIStaticFilesHandler):
    """Serves STATIC_URL; a traversal, a backslash, a NUL or an empty segment gets a 404."""

    async def get_response_async(self, request):
        if not plain_path(self.file_path(request.path)):
            return await _not_found(request)
        try:
            return await super().get_response_async(request)
        except (SuspiciousOperation, ValueError):  # what a finder refuses or cannot name
            return await _not_found(request)


def plain_path(path: str) -> bool:
    """Whether a relative path names a file by plain names only: no `.` or `..`, no empty
    segment (`//`, a leading `/`), no backslash (a separator on Windows) or NUL."""
    if "\\" in path or "\0" in path:
        return False
    return all(part not in ("", ".", "..") for part in path.split("/"))


async def _not_found(request):
    """The 404 any missing file gets (the message names no path of the server's); rendered
    off the event loop, as Django's handler renders its own."""
    response = await sync_to_async(response_for_exception, thread_sensitive=False)(
        request, Http404("No such static file.")
    )
    response._resource_closers.append(request.close)
    return response


def favicon(request):
    """/favicon.ico, which a browser asks for on every page that names no icon (the admin's,
    the API docs', an error page): sent to the app's icon among the static files, which the
    app or the proxy in front serves."""
    response = HttpResponseRedirect(static("rojo/favicon.ico"))
    response["Cache-Control"] = "max-age=86400"
    return response
