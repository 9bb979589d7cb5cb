"""Rojos saved before the key rule (or edited in the database) that break it, reported at
start-up: by `manage.py check` (and runserver, migrate) and in the server's log. Their chats
refuse before any request (rojos.models.key_sources.key_env_value), so this tells the admin why."""

import logging
import threading

from django.core import checks
from django.db import DatabaseError, connections

from rojos.models import Rojo
from rojos.models.key_sources import key_env_refusal

logger = logging.getLogger(__name__)


def rojo_key_problems() -> list[checks.CheckMessage]:
    """One warning per rojo whose API key env the rule refuses."""
    found = []
    for rojo in Rojo.objects.exclude(api_key_env="").only("pk", "slug", "api_key_env"):
        refusal = key_env_refusal(rojo.api_key_env)
        if refusal:
            found.append(
                checks.Warning(
                    f"rojo {rojo.slug!r} (id {rojo.pk}): its API key env {refusal}",
                    hint="Change the rojo's API key env in the admin (or set "
                    "ROJO_API_KEY_ENV_ALLOWED); until then its chats end in an error, "
                    "sending nothing.",
                    obj=rojo,
                    id="rojos.W001",
                )
            )
    return found


@checks.register(checks.Tags.security)
def rojo_key_check(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    """The system check: a database not there yet (before `migrate`) has no rojos to report."""
    try:
        return rojo_key_problems()
    except DatabaseError:
        return []


def rojo_key_check_soon() -> None:
    """A start-up hook: log the check's warnings from a thread of its own (the server starts
    meanwhile), as ASGI servers run no system checks."""

    def run() -> None:
        try:
            problems = rojo_key_check()
        except Exception:  # best effort, off the request path: `manage.py check` reports too
            logger.warning("could not check the rojos' key variables", exc_info=True)
            return
        finally:
            connections.close_all()
        for problem in problems:
            logger.warning("%s (%s) %s", problem.msg, problem.id, problem.hint)

    threading.Thread(target=run, name="rojo-key-check", daemon=True).start()
