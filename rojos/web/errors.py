"""Every error the API answers, turned into its status and JSON body in this one module.

The errors raised on purpose share one base type, roject.errors.AppError, and get their
status from one table: LoginRequired, StorageError, UndoRefused, TurnBusy and TurnLimited are
raised to the chat command, to replay and to the tools too (where a StorageError is a result
the model reads), and two of them belong to the storage gate, so none of them should know
about HTTP. Here the web layer chooses each status, in one place; an AppError it does not
list is a bad request.
The other handlers answer what is not ours: the database or the relay being down (503 and
Retry-After), a body Django cannot read, a turn that could not start. roject's files router
is mounted on this API, so its errors are answered here as well.
"""

import logging
from dataclasses import dataclass
from functools import partial

from django.conf import settings
from django.core.exceptions import PermissionDenied, RequestDataTooBig, SuspiciousOperation
from django.http import Http404, HttpRequest, HttpResponse
from django.http.multipartparser import MultiPartParserError
from ninja import NinjaAPI

from roject.errors import AppError
from roject.identity.tokens import TokenRefused
from roject.members.access import LoginRequired
from roject.storage import StorageError, TooLarge
from rojos.changes.ledger import EntryExists, VersionConflict
from rojos.changes.undo import UndoRefused
from rojos.context.budgets import BudgetExceeded
from rojos.context.model_listing import ModelListUnavailable
from rojos.errors import (
    ServerDraining,
    TurnBusy,
    TurnLimited,
    TurnNotStarted,
    TurnUnreachable,
)
from rojos.outages import UNAVAILABLE, outage_message

# The API's log lines keep the logger name they had before this module was split out.
logger = logging.getLogger("rojos.api")


@dataclass(frozen=True, slots=True)
class Answer:
    """How the API answers one type of error: `{"detail": <its message>}` with this status."""

    status: int
    default: str = ""  # the detail when the error has no message of its own
    retry_after: str = ""  # the Retry-After header's value, if any
    www_authenticate: str = ""  # the WWW-Authenticate header's value, if any
    # The body names the error's `code` too: a client acts on it (a draining server's refusal,
    # which stored nothing, is sent again; another 503 may have stored the message).
    coded: bool = False


ANSWERS: dict[type[Exception], Answer] = {
    AppError: Answer(400),
    StorageError: Answer(400),
    LoginRequired: Answer(401, "Log in first."),
    TokenRefused: Answer(401, www_authenticate='Bearer error="invalid_token"'),
    PermissionDenied: Answer(403, "Not allowed."),
    Http404: Answer(404, "Not found."),
    TurnBusy: Answer(409),
    TurnUnreachable: Answer(503, retry_after="5"),
    ServerDraining: Answer(503, retry_after="2", coded=True),
    UndoRefused: Answer(409),  # a StorageError, answered as a conflict, not a bad request
    EntryExists: Answer(409),
    TooLarge: Answer(413),
    TurnLimited: Answer(429, retry_after="60"),
    BudgetExceeded: Answer(429),  # its message says when the budget resets
    ModelListUnavailable: Answer(502),  # the provider refused its model list, or is down
}


def error_handlers_add(api: NinjaAPI) -> None:
    """Register on `api` a handler for every error above; ninja picks the most specific one."""
    for error, answer in ANSWERS.items():
        api.add_exception_handler(error, partial(_answered, api, answer))
    for error, message in UNAVAILABLE.items():
        api.add_exception_handler(error, partial(_unavailable, api, message))
    api.add_exception_handler(MultiPartParserError, partial(_unreadable, api))
    api.add_exception_handler(SuspiciousOperation, partial(_unreadable, api))
    api.add_exception_handler(TurnNotStarted, partial(_turn_not_started, api))
    api.add_exception_handler(VersionConflict, partial(_version_conflict, api))


def _version_conflict(api: NinjaAPI, request, exc: VersionConflict) -> HttpResponse:
    """409 with the file as it is now, so the page can show both versions to merge."""
    return _detail(api, request, 409, str(exc), current=exc.current, currentText=exc.text)


def _detail(api: NinjaAPI, request, status: int, detail: str, **extra) -> HttpResponse:
    return api.create_response(request, {"detail": detail, **extra}, status=status)


def _answered(api: NinjaAPI, answer: Answer, request: HttpRequest, exc: Exception):
    extra = {"code": exc.code} if answer.coded else {}
    response = _detail(api, request, answer.status, str(exc) or answer.default, **extra)
    if answer.retry_after:
        response["Retry-After"] = answer.retry_after
    if answer.www_authenticate:
        response["WWW-Authenticate"] = answer.www_authenticate
    return response


def _unavailable(api: NinjaAPI, message: str, request, exc: Exception, **extra) -> HttpResponse:
    """A database locked past its timeout, or a service unreachable: a clear 503 that says
    which and when to try again, not a 500 page; the cause goes to the log."""
    logger.warning("%s %s: %s (%s)", request.method, request.path, message, exc)
    response = _detail(api, request, 503, message, **extra)
    response["Retry-After"] = "5"
    return response


def _unreadable(api: NinjaAPI, request: HttpRequest, exc: Exception):
    """A body Django cannot parse: JSON like every other answer, not an HTML page (or, with
    DEBUG, a 500)."""
    logger.warning("%s %s: unreadable request: %s", request.method, request.path, exc)
    if isinstance(exc, RequestDataTooBig):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        return _detail(api, request, 413, f"The request is over the server's {limit:,}-byte limit.")
    return _detail(api, request, 400, "The request's body could not be read.")


def _turn_not_started(api: NinjaAPI, request: HttpRequest, exc: TurnNotStarted):
    """The message is stored but its turn could not start: say why, and name its conversation."""
    cause, conversation = exc.__cause__, exc.conversation_id
    if (message := outage_message(cause)) is not None:
        return _unavailable(api, message, request, cause, conversation=conversation)
    logger.error("%s %s: %s", request.method, request.path, exc, exc_info=cause)
    return _detail(api, request, 500, str(exc), conversation=conversation)
