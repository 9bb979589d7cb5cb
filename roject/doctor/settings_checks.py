"""Checks of settings alone: the key, DEBUG, the hosts and origins people reach the app at,
HTTPS and the proxy in front, and what several processes need."""

import os
from urllib.parse import urlsplit

from django.conf import settings
from django.http.request import validate_host
from django.utils.translation import ngettext

from . import Context, Finding, check

LOCAL_HOSTS = {"localhost", "127.0.0.1", "[::1]", "::1"}
COOKIE_SETTINGS = {"SESSION_COOKIE_SECURE": "session cookie", "CSRF_COOKIE_SECURE": "CSRF cookie"}
KEY_FIX = "set SECRET_KEY to python3 -c 'import secrets; print(secrets.token_urlsafe(50))'."


def _processes_configured() -> int:
    try:
        return int(os.environ.get("ROJO_PROCESSES") or 1)
    except ValueError:
        return 1


@check("settings")
def secret_key(context: Context) -> list[Finding]:
    key = settings.SECRET_KEY
    if key.startswith("django-insecure"):
        return [Finding(level="error", code="secret-key-development",
                        message="SECRET_KEY is the development key.", fix=KEY_FIX)]  # fmt: skip
    if len(key) < 50 or len(set(key)) < 5:
        return [
            Finding(
                level="error",
                code="secret-key-weak",
                message=f"SECRET_KEY has {len(key)} "
                f"{ngettext('character', 'characters', len(key))}, {len(set(key))} distinct.",
                fix=KEY_FIX,
            )
        ]
    return []


@check("settings")
def debug(context: Context) -> list[Finding]:
    if not settings.DEBUG:
        return []
    return [
        Finding(
            level="error",
            code="debug-on",
            message="DEBUG is on: errors show code and settings to anyone.",
            fix="remove DEBUG from the environment (or set DEBUG=0).",
        )
    ]


@check("settings")
def hosts(context: Context) -> list[Finding]:
    found = []
    if "*" in settings.ALLOWED_HOSTS:
        found.append(
            Finding(
                level="warning",
                code="allowed-hosts-any",
                message="ALLOWED_HOSTS accepts any Host header.",
                fix="set ALLOWED_HOSTS to the names people use (chat.example.com).",
            )
        )
    host = urlsplit(context.url).hostname if context.url else None
    if host and not validate_host(host, settings.ALLOWED_HOSTS):
        urls = [name for name in settings.ALLOWED_HOSTS if "/" in name]
        found.append(
            Finding(
                level="error",
                code="allowed-hosts-url",
                message=f"{host!r} is not in ALLOWED_HOSTS: every request answers 400.",
                fix=f"add {host} to ALLOWED_HOSTS"
                + (f", a host's name alone: not {urls[0]!r}." if urls else "."),
            )
        )
    return found


def _https_findings(url: str) -> list[Finding]:
    netloc = urlsplit(url).netloc
    origin = f"https://{netloc}"
    found = []
    behind_proxy = getattr(settings, "SECURE_PROXY_SSL_HEADER", None) is not None
    if not behind_proxy and origin not in settings.CSRF_TRUSTED_ORIGINS:
        found.append(
            Finding(
                level="error",
                code="csrf-origin",
                message=f"requests from {origin} arrive as HTTP from the TLS proxy, so their "
                "Origin does not match and every form and API call is refused (CSRF).",
                fix="set SECURE_PROXY_SSL_HEADER=1 (the proxy sets X-Forwarded-Proto) or add "
                f"{origin} to CSRF_TRUSTED_ORIGINS"
                + (", with its scheme." if netloc in settings.CSRF_TRUSTED_ORIGINS else "."),
            )
        )
    cookies = [name for name in COOKIE_SETTINGS if not getattr(settings, name)]
    if cookies:
        which = " and ".join(COOKIE_SETTINGS[name] for name in cookies)
        found.append(
            Finding(
                level="error",
                code="cookies-not-secure",
                message=f"the {which} may be sent over plain HTTP.",
                fix=_turned_on_fix(cookies, on="1", default="on"),
            )
        )
    if not settings.SECURE_HSTS_SECONDS:
        found.append(
            Finding(
                level="warning",
                code="hsts-off",
                message="no Strict-Transport-Security: a first visit over HTTP can be taken.",
                fix=_turned_on_fix(["SECURE_HSTS_SECONDS"], on="31536000", default="a year"),
            )
        )
    return found


def _turned_on_fix(names: list[str], *, on: str, default: str) -> str:
    """How to turn back on the HTTPS settings named, which are off by their own variables, by
    DEBUG (which turns their defaults off), or both: the fix names whichever did it."""
    own = [f"{name}={os.environ[name].strip()}" for name in names if _set(name)]
    if settings.DEBUG:
        debug = "DEBUG from the environment (or set DEBUG=0), which turns the HTTPS defaults off"
        return f"remove {' and '.join(own)}, and {debug}." if own else f"remove {debug}."
    if own:
        return f"remove {' and '.join(own)} (the default is {default})."
    return f"set {' and '.join(f'{name}={on}' for name in names)}."


def _set(name: str) -> bool:
    return bool(os.environ.get(name, "").strip())


@check("settings")
def https(context: Context) -> list[Finding]:
    found = []
    if context.url.startswith("https://"):
        found.extend(_https_findings(context.url))
    elif context.url.startswith("http://"):
        host = urlsplit(context.url).hostname or ""
        local = host in LOCAL_HOSTS or f"[{host}]" in LOCAL_HOSTS
        if not local and settings.SESSION_COOKIE_SECURE:
            found.append(
                Finding(
                    level="error",
                    code="plain-http",
                    message=f"{context.url} is plain HTTP: browsers keep no Secure cookie "
                    "from it, so nobody can log in (and passwords cross the network bare).",
                    fix="put a TLS proxy in front (deploy/compose.yaml) and use https://.",
                )
            )
    elif context.url:
        found.append(
            Finding(
                level="error",
                code="url-not-http",
                message=f"{context.url!r} is not an http(s) URL: nothing was checked against "
                "it (ALLOWED_HOSTS, the CSRF origin, HTTPS).",
                fix="give the address people use, scheme included: https://chat.example.com.",
            )
        )
    if getattr(settings, "SECURE_PROXY_SSL_HEADER", None) and not settings.ROJO_PROXY_COUNT:
        found.append(
            Finding(
                level="warning",
                code="proxy-count",
                message="a TLS proxy is trusted (SECURE_PROXY_SSL_HEADER) but ROJO_PROXY_COUNT "
                "is 0: login and upload limits count the proxy's address, so everyone "
                "shares one limit.",
                fix="set ROJO_PROXY_COUNT to the number of proxies in front (1 for one).",
            )
        )
    return found


@check("settings")
def processes(context: Context) -> list[Finding]:
    total = max(context.processes, _processes_configured())
    if total <= 1:
        return []
    found = []
    if not settings.REDIS_URL:
        found.append(
            Finding(
                level="error",
                code="processes-without-redis",
                message=f"{total} server processes without REDIS_URL: a reply started on one "
                "cannot be followed, stopped or approved from another.",
                fix="set REDIS_URL (redis://host:6379/0) for every process.",
            )
        )
    if settings.DATABASES["default"]["ENGINE"] == "roject.server.sqlite_backend":
        found.append(
            Finding(
                level="error",
                code="processes-on-sqlite",
                message=f"{total} server processes on SQLite: its writers lock each other "
                "out across processes.",
                fix="set DATABASE_URL to PostgreSQL (docs/operations.md).",
            )
        )
    return found
