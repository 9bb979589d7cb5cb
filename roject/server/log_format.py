"""Logs as one JSON object a line (ROJO_LOG_FORMAT=json), for a log collector.

Each line carries what is known of where it came from: the request's id (the proxy's
X-Request-ID, else one made here), the user's id, the project's and the conversation's; code
that knows them sets them with `log_context` (the access check, the turn's start). A line holds the
log message and these ids, never a header, a key or a message's text (the app's log messages
name no secrets: tests/provider/test_key_scrubbing.py).
"""

import contextvars
import logging
import re
import uuid
from datetime import UTC, datetime

import orjson

_FIELDS = ("request_id", "user_id", "project_id", "conversation_id")
_context: dict[str, contextvars.ContextVar] = {
    name: contextvars.ContextVar(f"rojo_log_{name}", default=None) for name in _FIELDS
}
# A proxy's request id is used if it looks like one; anything else is replaced.
_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")


def log_context(**values) -> None:
    """Name what the current request or turn is about, for every later line of its task."""
    for name, value in values.items():
        _context[name].set(value)


def log_context_get() -> dict:
    return {name: var.get() for name, var in _context.items() if var.get() is not None}


class JsonFormatter(logging.Formatter):
    """One JSON object a line: time, level, logger, message, the context's ids, and the
    exception's traceback when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        line = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
            **log_context_get(),
        }
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(line).decode()


class RequestIds:
    """ASGI middleware: every HTTP request's id in the log context. Nothing is wrapped around
    its response: a streamed reply's chunks pass as they would without it."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http":
            given = dict(scope.get("headers", [])).get(b"x-request-id", b"").decode("latin-1")
            for name in _FIELDS:
                _context[name].set(None)
            log_context(request_id=given if _REQUEST_ID.fullmatch(given) else uuid.uuid4().hex)
        await self.app(scope, receive, send)
