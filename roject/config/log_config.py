"""LOGGING from ROJO_LOG_LEVEL and ROJO_LOG_FORMAT. ROJO_LOG_FORMAT=json: one JSON object a
line with the request's, user's, project's and conversation's ids
(roject/server/log_format.py), uvicorn's own lines included."""

import os

from django.core.exceptions import ImproperlyConfigured

_LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def logging_config() -> dict:
    """Django's LOGGING: the app's loggers at ROJO_LOG_LEVEL, on the console, as JSON lines
    with ROJO_LOG_FORMAT=json."""
    level = os.environ.get("ROJO_LOG_LEVEL", "").strip().upper() or "INFO"
    if level not in _LOG_LEVELS:
        raise ImproperlyConfigured(
            f"ROJO_LOG_LEVEL: {level!r} is not a level: {', '.join(_LOG_LEVELS)}."
        )
    json_lines = os.environ.get("ROJO_LOG_FORMAT", "").strip().lower() == "json"
    config = {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": "roject.server.log_format.JsonFormatter"}},
        "handlers": {"console": {"class": "logging.StreamHandler"}},
        "loggers": {
            "roject": {"handlers": ["console"], "level": level},
            "rojos": {"handlers": ["console"], "level": level},
            **(
                {
                    name: {"handlers": ["console"], "level": "INFO", "propagate": False}
                    for name in ("uvicorn", "uvicorn.error", "uvicorn.access", "django")
                }
                if json_lines
                else {}
            ),
        },
    }
    if json_lines:
        config["handlers"]["console"]["formatter"] = "json"
    return config
