"""The doctor's checks of the rojos (roject/doctor): the turns' heartbeat against their stale
age, each rojo's key variable set and allowed, and its provider answering within 2 seconds. A
key is never printed, nor sent anywhere: the reachability check asks for the model list
without it."""

import os

import requests
from django.conf import settings
from django.db import DatabaseError

from roject.doctor import Context, Finding, check
from rojos.models.key_sources import key_env_refusal
from rojos.provider.failures import rojo_fixes

from .models import Rojo

PROVIDER_SECONDS = 2.0


def _rojos() -> list[Rojo]:
    try:
        return list(Rojo.objects.only("pk", "slug", "name", "base_url", "api_key_env", "api_key"))
    except DatabaseError:
        return []  # the database check says so


@check("settings")
def turn_heartbeat(context: Context) -> list[Finding]:
    """A claim not refreshed within ROJO_TURN_STALE_SECONDS is a dead reply's, which the next
    request ends: a stale age within a beat or two ends live replies of other processes."""
    beat = settings.ROJO_TURN_HEARTBEAT_SECONDS
    stale = settings.ROJO_TURN_STALE_SECONDS
    if stale >= 3 * beat:
        return []
    certain = stale <= beat
    return [
        Finding(
            level="error" if certain else "warning",
            code="turn-stale-age",
            message=f"ROJO_TURN_STALE_SECONDS {stale:g} is "
            + ("not more than" if certain else "less than three times")
            + f" ROJO_TURN_HEARTBEAT_SECONDS {beat:g}: a reply running on another process is "
            + (
                "taken for dead between its heartbeats"
                if certain
                else "taken for dead when a heartbeat comes late (a busy database)"
            )
            + ", and ended as interrupted by the next request to its conversation.",
            fix=f"set ROJO_TURN_STALE_SECONDS to {4 * beat:g} or more (the defaults: 2 and 8).",
        )
    ]


@check("runtime")
def rojo_keys(context: Context) -> list[Finding]:
    found = []
    for rojo in _rojos():
        name = rojo.api_key_env
        if not name:
            continue
        refusal = key_env_refusal(name)
        if refusal:
            found.append(
                Finding(
                    level="error",
                    code="rojo-key-rule",
                    message=f"rojo {rojo.slug!r}: its API key env {refusal}; its chats refuse.",
                    fix="rename the variable to ROJO_KEY_<NAME> and set it on the rojo "
                    "(admin), or list it in ROJO_API_KEY_ENV_ALLOWED.",
                )
            )
        elif not os.environ.get(name) and not rojo.api_key:
            found.append(
                Finding(
                    level="warning",  # no key is right for a local server (Ollama, LM Studio)
                    code="rojo-key-missing",
                    message=f"rojo {rojo.slug!r} reads its key from {name}, which is not set "
                    "in this process's environment: its requests go without a key, which a "
                    "local server (Ollama, LM Studio) takes and a hosted provider refuses.",
                    fix=f"for a provider that needs a key, set {name} for every server process "
                    "(the env file), or store the key on the rojo (admin).",
                )
            )
    return found


@check("network")
def providers(context: Context) -> list[Finding]:
    found = []
    seen: set[str] = set()
    for rojo in _rojos():
        base = rojo.base_url.rstrip("/")
        if base in seen:
            continue
        seen.add(base)
        try:
            requests.get(base + "/models", timeout=PROVIDER_SECONDS)
        except requests.RequestException as exc:
            found.append(
                Finding(
                    level="warning",
                    code="provider-unreachable",
                    message=f"rojo {rojo.slug!r}: its provider at {base} does not answer "
                    f"within {PROVIDER_SECONDS:g} s ({type(exc).__name__}).",
                    fix=f"check {rojo_fixes(rojo).base_url}, and that this host reaches it "
                    "(proxy, firewall, DNS).",
                )
            )
    return found
