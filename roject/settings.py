"""Settings for Rojo Chat, read from environment variables with embedded defaults.

With nothing set, the app runs on SQLite, the in-memory channel layer and ./storage.
`DATABASE_URL` (postgres://...) and `REDIS_URL` switch to the multi-instance setup. What
takes more than a line to parse and check is in roject/config/, by group.
"""

import os
import sys
from pathlib import Path

from roject.config.databases import databases
from roject.config.environment import env_bool, env_float, env_int, env_list, secret_key
from roject.config.log_config import logging_config
from roject.config.oidc import oidc_group_roles
from roject.config.redis import caches, channel_layers, redis_url

BASE_DIR = Path(__file__).resolve().parent.parent

DEBUG = env_bool("DEBUG", False)

# SECRET_KEY, or the file SECRET_KEY_FILE names (roject/config/environment.py).
SECRET_KEY = secret_key(debug=DEBUG)

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "127.0.0.1,localhost,[::1]")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", "")

INSTALLED_APPS = [
    # daphne's app only gives `runserver` its ASGI server (`make run`); every other process
    # (uvicorn, daphne itself, the tests, commands) would load Twisted for nothing: 0.5 s
    # of each start.
    *(["daphne"] if sys.argv[1:2] == ["runserver"] else []),
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "ninja",  # its templates and static files: /api/docs runs Swagger UI from this server
    "roject",
    "rojos",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "roject.server.middleware.ContentSecurityPolicyMiddleware",
]

# Django's FallbackStorage, its backends made only where used (roject/server/message_storage.py).
MESSAGE_STORAGE = "roject.server.message_storage.LazyFallbackStorage"

ROOT_URLCONF = "roject.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "roject.members.context_processors.header",
                "rojos.web.context_processors.mcp_connections",
            ],
        },
    },
]

ASGI_APPLICATION = "roject.asgi.application"
WSGI_APPLICATION = None

# DATABASE_URL: PostgreSQL (its pool: ROJO_DB_POOL_SIZE, ROJO_DB_POOL_TIMEOUT) or, unset,
# SQLite (roject/config/databases.py).
DATABASES = databases(BASE_DIR)

# The threads every request's and turn's database calls run on (roject/server/db_threads.py): as
# many calls can wait at once (SQLite busy, a row lock, a database out of reach) before the
# others queue behind them. SQLite's: 3, as its writers take turns on one lock anyway and its
# reads wait on nothing, while each thread more fights the event loop for the GIL (a burst's
# running streams waited twice as long at 8: docs/performance.md, section 10); PostgreSQL's
# trips wait on the network, which more threads overlap.
ROJO_DB_THREADS = env_int(
    "ROJO_DB_THREADS", 3 if DATABASES["default"]["ENGINE"] == "roject.server.sqlite_backend" else 8
)
# Turn starts under way at once per process, the rest waiting in order of arrival
# (rojos/turns/admission.py); a start holds its place at most this many seconds.
ROJO_START_CONCURRENCY = max(1, env_int("ROJO_START_CONCURRENCY", 16, positive=True))
ROJO_START_HOLD_SECONDS = env_float("ROJO_START_HOLD_SECONDS", 1)
# The longest a step's writes (its reply, usage, the turn's end) wait for the starts under way.
ROJO_END_YIELD_SECONDS = env_float("ROJO_END_YIELD_SECONDS", 3)

# REDIS_URL: the channel layers (ROJO_REDIS_SOCKET_TIMEOUT, ROJO_REDIS_POOL_SIZE) and the
# cache in Redis, shared by the server processes; unset, in one process's memory
# (roject/config/redis.py).
REDIS_URL = redis_url()
CHANNEL_LAYERS = channel_layers(REDIS_URL)
CACHES = caches(REDIS_URL)

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LOGIN_URL = "login"
# Failed logins per username and per client address in a window of ROJO_LOGIN_LOCKOUT_SECONDS
# (it opens with the first attempt); past either, logins with that username or from that
# address are refused until the window ends (0 turns a limit off). The site's login and the
# admin's count together.
ROJO_LOGIN_USER_FAILURES = env_int("ROJO_LOGIN_USER_FAILURES", 5)
ROJO_LOGIN_ADDRESS_FAILURES = env_int("ROJO_LOGIN_ADDRESS_FAILURES", 20)
ROJO_LOGIN_LOCKOUT_SECONDS = env_int("ROJO_LOGIN_LOCKOUT_SECONDS", 900)
# Reverse proxies in front of the app that each append the client's address to
# X-Forwarded-For: the limits then count the address the outermost one saw. 0 (the default)
# counts REMOTE_ADDR, right when clients connect directly, or when the server itself takes
# the address from the proxy (uvicorn or daphne with --proxy-headers).
ROJO_PROXY_COUNT = env_int("ROJO_PROXY_COUNT", 0)
# Who may read /metrics (roject/server/metrics.py): addresses or networks of the scraper's
# connection, and/or a bearer token. Neither set: nobody.
ROJO_METRICS_ALLOWED = env_list("ROJO_METRICS_ALLOWED", "")
ROJO_METRICS_TOKEN = os.environ.get("ROJO_METRICS_TOKEN", "").strip()
# An invitation link to a project works once, for this many days.
ROJO_INVITATION_DAYS = env_int("ROJO_INVITATION_DAYS", 7)
# Days an audit entry is kept; `manage.py audit_prune` removes older ones (0 keeps all).
ROJO_AUDIT_RETENTION_DAYS = env_int("ROJO_AUDIT_RETENTION_DAYS", 365)
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"


# Single sign-on (roject/identity/oidc/config.py): on when a discovery URL (or an issuer,
# whose discovery document is <issuer>/.well-known/openid-configuration) and a client id are set.
ROJO_OIDC_DISCOVERY_URL = os.environ.get("ROJO_OIDC_DISCOVERY_URL", "").strip()
ROJO_OIDC_ISSUER = os.environ.get("ROJO_OIDC_ISSUER", "").strip()
ROJO_OIDC_CLIENT_ID = os.environ.get("ROJO_OIDC_CLIENT_ID", "").strip()
ROJO_OIDC_CLIENT_SECRET = os.environ.get("ROJO_OIDC_CLIENT_SECRET", "")
ROJO_OIDC_SCOPES = os.environ.get("ROJO_OIDC_SCOPES", "").strip() or "openid email profile"
# A provider that sends no email_verified (Entra ID): whether its emails count as verified
# (only for a first sign-in's match by email; see docs/teams.md, "Single sign-on").
ROJO_OIDC_EMAIL_VERIFIED_DEFAULT = env_bool("ROJO_OIDC_EMAIL_VERIFIED_DEFAULT", False)
ROJO_OIDC_GROUPS_CLAIM = os.environ.get("ROJO_OIDC_GROUPS_CLAIM", "").strip() or "groups"
ROJO_OIDC_GROUP_ROLES = oidc_group_roles(os.environ.get("ROJO_OIDC_GROUP_ROLES", ""))
ROJO_OIDC_BUTTON_LABEL = os.environ.get("ROJO_OIDC_BUTTON_LABEL", "").strip() or "SSO"
# Seconds the provider's discovery document (its endpoints and keys' URL) is kept.
ROJO_OIDC_DISCOVERY_SECONDS = env_int("ROJO_OIDC_DISCOVERY_SECONDS", 3600)
# Off: no password login at all, on the site's login page or the admin's (SSO only).
ROJO_PASSWORD_LOGIN = env_bool("ROJO_PASSWORD_LOGIN", True)
# Passwords and the session's user: Django's ModelBackend with that user's read prepared
# (roject/identity/backends.py); Django's own stays for the sessions stored naming it. The
# OIDC backend answers only the OIDC callback (roject/oidc_backend.py); without the
# ROJO_OIDC_* variables it answers nothing.
AUTHENTICATION_BACKENDS = [
    "roject.identity.backends.PreparedModelBackend",
    "roject.oidc_backend.OidcBackend",
    "django.contrib.auth.backends.ModelBackend",
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
# Where `collectstatic` puts them for a proxy to serve (the compose stack: a volume of Caddy's).
STATIC_ROOT = Path(os.environ.get("STATIC_ROOT") or BASE_DIR / "staticfiles")

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Project files live under ROJO_STORAGE_DIR/<project_id>/root/.
ROJO_STORAGE_DIR = Path(os.environ.get("ROJO_STORAGE_DIR") or BASE_DIR / "storage").resolve()
ROJO_MAX_READ_BYTES = env_int("ROJO_MAX_READ_BYTES", 1024 * 1024)
# PDFs are read as text (roject/documents/): the largest PDF read, and the CPU seconds and
# memory its reader (a child process) may use before it is stopped.
ROJO_MAX_PDF_BYTES = env_int("ROJO_MAX_PDF_BYTES", 32 * 1024 * 1024)
ROJO_PDF_SECONDS = env_int("ROJO_PDF_SECONDS", 20, positive=True)
ROJO_PDF_MEMORY_BYTES = env_int("ROJO_PDF_MEMORY_BYTES", 1024 * 1024 * 1024, positive=True)
# How long a preview's address (roject/previews/) stays good: the file panel asks for a new
# one at each opening and refresh.
ROJO_PREVIEW_SECONDS = env_int("ROJO_PREVIEW_SECONDS", 15 * 60, positive=True)
ROJO_MAX_WRITE_BYTES = env_int("ROJO_MAX_WRITE_BYTES", 1024 * 1024)
# Images in the message box (rojos/provider/images.py): the largest image, and the most one
# message may carry (pasted, dropped, attached or @-mentioned together).
ROJO_MAX_IMAGE_BYTES = env_int("ROJO_MAX_IMAGE_BYTES", 5 * 1024 * 1024)
ROJO_MAX_IMAGES_PER_MESSAGE = env_int("ROJO_MAX_IMAGES_PER_MESSAGE", 4)
# PDFs dropped, pasted or attached in the message box (rojos/provider/attachments.py): the
# most one message may carry; each is within ROJO_MAX_PDF_BYTES, their text within
# ROJO_MAX_READ_BYTES with the message's other attached files.
ROJO_MAX_PDFS_PER_MESSAGE = env_int("ROJO_MAX_PDFS_PER_MESSAGE", 4)
# Uploads from the file panel: the largest file, and the most one upload may bring in (a
# file, or everything a .zip unpacks to); a .zip entry that unpacks to more than RATIO times
# its compressed size is refused as a likely zip bomb, and so are entries past ENTRIES.
ROJO_UPLOAD_MAX_FILE_BYTES = env_int("ROJO_UPLOAD_MAX_FILE_BYTES", 100 * 1024 * 1024)
ROJO_UPLOAD_MAX_BYTES = env_int("ROJO_UPLOAD_MAX_BYTES", 1024 * 1024 * 1024)
ROJO_UPLOAD_ZIP_MAX_RATIO = env_int("ROJO_UPLOAD_ZIP_MAX_RATIO", 100)
ROJO_UPLOAD_ZIP_MAX_ENTRIES = env_int("ROJO_UPLOAD_ZIP_MAX_ENTRIES", 10_000)
# Who may upload is decided from the headers before the body is read (roject/server/upload_gate.py);
# a request body that sends nothing for STALL seconds is cut (0: never); uploads under way at
# once in one process, per user and per client address (decisions included; 0: no bound).
ROJO_UPLOAD_STALL_SECONDS = env_float("ROJO_UPLOAD_STALL_SECONDS", 30)
ROJO_UPLOAD_MAX_IN_FLIGHT = env_int("ROJO_UPLOAD_MAX_IN_FLIGHT", 2)
ROJO_UPLOAD_MAX_IN_FLIGHT_PER_ADDRESS = env_int("ROJO_UPLOAD_MAX_IN_FLIGHT_PER_ADDRESS", 8)
# The longest a search_text call may run, in seconds (its pattern comes from the model).
ROJO_SEARCH_SECONDS = env_float("ROJO_SEARCH_SECONDS", 5, positive=True)
# Environment variables a rojo may read its API key from, beyond ROJO_API_KEY and ROJO_KEY_*
# (comma-separated; rojos/models/key_sources.py). Any other variable of the process is refused.
ROJO_API_KEY_ENV_ALLOWED = env_list("ROJO_API_KEY_ENV_ALLOWED", "")
# Modules imported at startup that register tools of their own (comma-separated).
ROJO_TOOL_MODULES = env_list("ROJO_TOOL_MODULES", "")
# Per-user limits against runaway cost (0 turns a limit off).
ROJO_USER_MESSAGES_PER_MINUTE = env_int("ROJO_USER_MESSAGES_PER_MINUTE", 20)
ROJO_USER_CONCURRENT_TURNS = env_int("ROJO_USER_CONCURRENT_TURNS", 3)
# Caps on one turn's work (0 turns a cap off): the bytes tool results may return to the
# model, and the tool calls that run per model response and per turn. Past a cap a call is
# answered with an error the model reads, not run.
ROJO_TURN_READ_BYTES = env_int("ROJO_TURN_READ_BYTES", 8 * 1024 * 1024)
ROJO_MAX_CALLS_PER_RESPONSE = env_int("ROJO_MAX_CALLS_PER_RESPONSE", 32)
ROJO_MAX_CALLS_PER_TURN = env_int("ROJO_MAX_CALLS_PER_TURN", 200)
# A tool result over ROJO_MAX_READ_BYTES is kept for read_result (paged, not cut); this much
# of one is kept at most, the rest cut with a note (disk, and memory while it is put together).
ROJO_MAX_KEPT_RESULT_BYTES = env_int("ROJO_MAX_KEPT_RESULT_BYTES", 64 * 1024 * 1024)
# Days a kept result stays when its conversation does (0: until the conversation goes); the
# storage sweep and `manage.py storage_cleanup` remove older ones.
ROJO_KEPT_RESULT_DAYS = env_int("ROJO_KEPT_RESULT_DAYS", 30)
# Budgets of model use per user and per project, by day and by month (UTC), in tokens
# (prompt and completion) or US dollars; 0: none. The admin overrides them per user/project.
ROJO_USER_DAILY_TOKENS = env_int("ROJO_USER_DAILY_TOKENS", 0)
ROJO_USER_MONTHLY_TOKENS = env_int("ROJO_USER_MONTHLY_TOKENS", 0)
ROJO_USER_DAILY_COST = env_float("ROJO_USER_DAILY_COST", 0)
ROJO_USER_MONTHLY_COST = env_float("ROJO_USER_MONTHLY_COST", 0)
ROJO_PROJECT_DAILY_TOKENS = env_int("ROJO_PROJECT_DAILY_TOKENS", 0)
ROJO_PROJECT_MONTHLY_TOKENS = env_int("ROJO_PROJECT_MONTHLY_TOKENS", 0)
ROJO_PROJECT_DAILY_COST = env_float("ROJO_PROJECT_DAILY_COST", 0)
ROJO_PROJECT_MONTHLY_COST = env_float("ROJO_PROJECT_MONTHLY_COST", 0)
# A client that reads nothing of a response for this long is disconnected (it can re-attach):
# what a connection holds unsent stays bounded (roject/server/write_timeout.py). 0: no limit.
ROJO_CLIENT_WRITE_TIMEOUT = env_float("ROJO_CLIENT_WRITE_TIMEOUT", 30)
# Freed memory is handed back to the system this long after turns start or end, at most this
# often (rojos/turns/memory_trim.py; 0: never).
ROJO_MALLOC_TRIM_SECONDS = env_float("ROJO_MALLOC_TRIM_SECONDS", 1)
# Blocks of this many KiB or more get a mapping of their own, freed at once (glibc; 0: glibc's
# sliding threshold).
ROJO_MALLOC_MMAP_KIB = env_int("ROJO_MALLOC_MMAP_KIB", 64)
# At most this many glibc arenas, shared by the process's threads (0: glibc's, 8 a core).
ROJO_MALLOC_ARENAS = env_int("ROJO_MALLOC_ARENAS", 2)
# Seconds a call that needs approval waits for a decision before it counts as denied.
ROJO_APPROVAL_TIMEOUT = env_float("ROJO_APPROVAL_TIMEOUT", 300)
# The same for a call routed to the project's owners ("changes need approval by an owner"):
# longer, and not counted in the turn's ROJO_TURN_MAX_SECONDS.
ROJO_OWNER_APPROVAL_TIMEOUT = env_float("ROJO_OWNER_APPROVAL_TIMEOUT", 3600)
# While a reply streams, its text so far is saved this often (a crash loses at most that).
ROJO_DRAFT_SECONDS = env_float("ROJO_DRAFT_SECONDS", 5)
# A tool call still streaming its arguments is shown after this long, then updated this often.
ROJO_TOOL_DELTA_SECONDS = env_float("ROJO_TOOL_DELTA_SECONDS", 0.2)
# Seconds to wait for the provider's next byte, and retries of a failed request (429, 5xx).
ROJO_PROVIDER_TIMEOUT = env_float("ROJO_PROVIDER_TIMEOUT", 120, positive=True)
ROJO_PROVIDER_RETRIES = env_int("ROJO_PROVIDER_RETRIES", 2)
# Seconds to connect and get a response's headers; and the most one request may take over
# all its tries until its stream starts (a provider that never answers fails within it).
ROJO_PROVIDER_HEADERS_TIMEOUT = env_float("ROJO_PROVIDER_HEADERS_TIMEOUT", 45, positive=True)
ROJO_PROVIDER_TOTAL_TIMEOUT = env_float("ROJO_PROVIDER_TOTAL_TIMEOUT", 150, positive=True)
# The longest a turn waits for a provider to list its model's context window (once an hour).
ROJO_WINDOW_PROBE_SECONDS = env_float("ROJO_WINDOW_PROBE_SECONDS", 2)
# MCP servers: a call's limit, a server's start (and first listing), an idle session's end.
# A live stream checks this often, whatever its traffic, that its user is still an active
# member and its API token still live; it ends when not.
ROJO_LIVE_CHECK_SECONDS = env_float("ROJO_LIVE_CHECK_SECONDS", 5, positive=True)
ROJO_MCP_CALL_TIMEOUT = env_float(
    "ROJO_MCP_CALL_TIMEOUT", 60, positive=True
)  # of silence: progress resets it
# A call that keeps reporting progress still ends after this long, in all.
ROJO_MCP_CALL_MAX_SECONDS = env_float("ROJO_MCP_CALL_MAX_SECONDS", 1800, positive=True)
ROJO_MCP_START_TIMEOUT = env_float("ROJO_MCP_START_TIMEOUT", 30, positive=True)
ROJO_MCP_IDLE_SECONDS = env_float("ROJO_MCP_IDLE_SECONDS", 600, positive=True)
# Hosts (names) and networks (10.20.0.0/16, an address) that an HTTP MCP server's OAuth
# requests may reach though internal: another host than the server's own is otherwise
# reached only on public addresses (rojos/mcp/destinations.py).
ROJO_MCP_OAUTH_INTERNAL_ALLOWED = env_list("ROJO_MCP_OAUTH_INTERNAL_ALLOWED", "")
# How long a server's question during a call waits for the person's answer (then: cancel).
ROJO_ELICITATION_SECONDS = env_float("ROJO_ELICITATION_SECONDS", 300, positive=True)
# The MCP endpoint serves the built-in tools; tools of your own (ROJO_TOOL_MODULES) too
# only when this is on, as they are off until enabled per rojo and no rojo is behind a call.
ROJO_MCP_SERVE_USER_TOOLS = env_bool("ROJO_MCP_SERVE_USER_TOOLS", False)
# The keys that seal MCP servers' OAuth tokens at rest (Fernet keys, comma-separated): the
# first seals, each opens, so a key is rotated by putting a new one first (then
# `manage.py mcp_tokens_reseal`). Empty: a key derived from SECRET_KEY (and its fallbacks).
ROJO_MCP_TOKEN_KEYS = env_list("ROJO_MCP_TOKEN_KEYS", "")
# The largest request body the MCP endpoint reads (counted on the wire, before the SDK
# holds it), and the largest call arguments it stores: room for a write of the largest file.
ROJO_MCP_MAX_BODY_BYTES = env_int("ROJO_MCP_MAX_BODY_BYTES", 2 * ROJO_MAX_WRITE_BYTES)
# The longest one turn may run, approvals included (not those routed to owners): a provider
# that streams (or keeps the connection alive) for ever must not hold a conversation and its
# cost without end.
ROJO_TURN_MAX_SECONDS = env_float("ROJO_TURN_MAX_SECONDS", 1800, positive=True)
# A running turn refreshes its claim this often; a claim older than the stale age is dead.
ROJO_TURN_HEARTBEAT_SECONDS = env_float("ROJO_TURN_HEARTBEAT_SECONDS", 2, positive=True)
ROJO_TURN_STALE_SECONDS = env_float("ROJO_TURN_STALE_SECONDS", 8, positive=True)
# Seconds a Stop or an approval waits for the running turn to confirm it (else: 503, retry).
ROJO_RELAY_CONFIRM_SECONDS = env_float("ROJO_RELAY_CONFIRM_SECONDS", 5, positive=True)
# Seconds a running turn retries a database write that fails before it gives up.
ROJO_DB_RETRY_SECONDS = env_float("ROJO_DB_RETRY_SECONDS", 30)
# A stopped server process (SIGTERM; roject/server/graceful.py, under `manage.py serve`)
# lets running replies finish for this long, then ends the rest as interrupted.
ROJO_SHUTDOWN_GRACE_SECONDS = env_float("ROJO_SHUTDOWN_GRACE_SECONDS", 30)
# What a process does as it stops, by dotted string (roject imports nothing of the apps).
ROJO_SHUTDOWN_HOOKS = ["rojos.turns.shutdown.turns_drain"]
# What a restore (manage.py restore, roject/backup/load.py) runs once it has committed, by
# dotted string: the apps' own clean-up of what a backup caught under way, and checks whose
# returned words the command prints (secrets sealed with another installation's key).
ROJO_RESTORE_HOOKS = [
    "rojos.turns.owner.restored_turns_end",
    "rojos.mcp.unopened.sealed_unopened_note",
]
# What `verify-backup` (and a restore's first read) runs over the archive's rows, by dotted
# string: classes whose `note()` the command prints (secrets a restore here could not open).
ROJO_VERIFY_HOOKS = ["rojos.mcp.unopened.SealedInArchive"]
# What a restore asks before it changes anything, by dotted string: each returns why it
# must not go on (replies running on this installation's servers), or None.
ROJO_RESTORE_CHECKS = ["rojos.turns.owner.running_turns_refusal"]
# Called once when the ASGI app loads (roject/asgi.py), by dotted path.
ROJO_STARTUP_HOOKS = [
    "rojos.turns.owner.turns_of_past_lives_end_soon",
    "roject.backup.interrupted.storage_sweep_soon",  # what crashes left on the storage
    "rojos.models.key_checks.rojo_key_check_soon",  # rojos whose key variable the rule refuses
]

# A session is read from the cache (the process's memory, or Redis with REDIS_URL: shared by
# the processes) and from the database only on a miss; it is written to both. Its user is
# still read on each request: a deactivated user or a changed password ends it at once. While
# the cache cannot be reached, sessions come from the database.
SESSION_ENGINE = (
    "roject.identity.sessions"  # cached_db, a cache outage a miss (roject/identity/sessions.py)
)
SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_SAMESITE = "Lax"
SESSION_COOKIE_SAMESITE = "Lax"
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"

# Production defaults: HTTPS everywhere unless explicitly turned off (e.g. behind a TLS proxy
# that already redirects, set SECURE_SSL_REDIRECT=0 and SECURE_PROXY_SSL_HEADER=1).
_https = not DEBUG
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", _https)
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", _https)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", _https)
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31536000 if _https else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", _https)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", _https)
if env_bool("SECURE_PROXY_SSL_HEADER", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

# ROJO_LOG_LEVEL, and ROJO_LOG_FORMAT=json: one JSON object a line with the request's,
# user's, project's and conversation's ids (roject/config/log_config.py).
LOGGING = logging_config()
