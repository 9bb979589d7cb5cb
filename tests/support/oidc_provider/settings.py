"""The test provider's settings, from the environment tests/support/oidc_server.py starts it
with."""

import os
from pathlib import Path

HERE = Path(__file__).resolve().parent

SECRET_KEY = "test-oidc-provider-only"
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
# The app runs on 127.0.0.1 too, and cookies ignore ports: the provider's are named apart.
SESSION_COOKIE_NAME = "provider_sessionid"
CSRF_COOKIE_NAME = "provider_csrftoken"

INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "oauth2_provider",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
]
ROOT_URLCONF = "tests.support.oidc_provider.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [HERE / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {"context_processors": ["django.template.context_processors.request"]},
    }
]
DATABASES = {
    "default": {"ENGINE": "django.db.backends.sqlite3", "NAME": os.environ["OIDC_PROVIDER_DB"]}
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
LOGIN_URL = "/accounts/login/"
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # fast, test-only

OAUTH2_PROVIDER = {
    "OIDC_ENABLED": True,
    "OIDC_RSA_PRIVATE_KEY": Path(os.environ["OIDC_PROVIDER_KEY"]).read_text(),
    "OIDC_RP_INITIATED_LOGOUT_ENABLED": True,
    "OIDC_RP_INITIATED_LOGOUT_ALWAYS_PROMPT": False,
    "OAUTH2_VALIDATOR_CLASS": "tests.support.oidc_provider.validator.ClaimsValidator",
    "SCOPES": {
        "openid": "OpenID Connect",
        "email": "Your email address",
        "profile": "Your name and groups",
    },
    "PKCE_REQUIRED": True,
    # The consent page shows until the user has allowed the client once (and again after
    # a logout, which deletes the user's tokens).
    "REQUEST_APPROVAL_PROMPT": "auto",
    # Client ID metadata documents (Rojo's, fetched from the app: cimd.py), fetched again
    # at each use and never backed off, so that each test sees the document it serves.
    "CIMD_ENABLED": True,
    "CIMD_METADATA_FETCHER": "tests.support.oidc_provider.cimd.SiteFetcher",
    "CIMD_METADATA_MIN_AGE_SECONDS": 0,
    "CIMD_METADATA_MAX_AGE_SECONDS": 0,
    "CIMD_FAILURE_BACKOFF_SECONDS": 0,
}
