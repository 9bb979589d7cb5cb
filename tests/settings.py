"""Test settings: the app's own settings with a throw-away key and a scratch storage dir."""

import os
import tempfile

# Long enough for the configuration doctor, which /readyz consults.
os.environ.setdefault(
    "SECRET_KEY", "tests-only-not-a-secret-tests-only-not-a-secret-tests-only-not-a-secret"
)


def _worker_redis_url(url: str, worker: str) -> str:
    """REDIS_URL's database number plus the xdist worker's index (gw2: base + 2), so workers
    never read each other's channel messages or cache keys; server processes a test starts
    inherit it from the environment."""
    base, _, number = url.rstrip("/").rpartition("/")
    if not number.isdigit():
        base, number = url.rstrip("/"), "0"
    return f"{base}/{int(number) + int(worker.removeprefix('gw'))}"


if os.environ.get("REDIS_URL", "").strip() and os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ["REDIS_URL"] = _worker_redis_url(
        os.environ["REDIS_URL"].strip(), os.environ["PYTEST_XDIST_WORKER"]
    )

from roject.settings import *  # noqa: E402, F403

ROJO_STORAGE_DIR = Path(tempfile.mkdtemp(prefix="rojo-test-storage-"))  # noqa: F405
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
SECURE_SSL_REDIRECT = False
# Forming tool calls are shown only by the tests about them (they set it lower): elsewhere a
# loaded machine must not add a TOOL_CALL_DELTA to the sequences of events the tests expect.
ROJO_TOOL_DELTA_SECONDS = float(os.environ.get("ROJO_TOOL_DELTA_SECONDS") or 30)
# The in-process test server does not sweep the storage at start-up: each test sets a storage
# dir of its own, which a sweep on a thread might read half-way. Server processes do (their
# settings are the app's), and a test of theirs checks it.
_SWEEP = "roject.backup.interrupted.storage_sweep_soon"
# Nor does it check the rojos' key variables on a thread of its own (outside the test's
# database access); the system check is tested as `manage.py check` runs it.
_KEY_CHECK = "rojos.models.key_checks.rojo_key_check_soon"
ROJO_STARTUP_HOOKS = [h for h in ROJO_STARTUP_HOOKS if h not in (_SWEEP, _KEY_CHECK)]  # noqa: F405
if DATABASES["default"]["ENGINE"] == "roject.server.sqlite_backend":  # noqa: F405
    # A file, not shared-cache memory, so the live ASGI server's threads can write concurrently.
    DATABASES["default"]["TEST"] = {  # noqa: F405
        "NAME": str(Path(tempfile.gettempdir()) / f"rojo-test-{os.getpid()}.sqlite3")  # noqa: F405
    }
elif DATABASES["default"]["ENGINE"].startswith("django.db.backends.postgresql"):  # noqa: F405
    # One test database per run (pytest-django adds the xdist worker's suffix), so two runs on
    # one server (CI, a developer) never collide.
    _NAME = DATABASES["default"]["NAME"]  # noqa: F405
    DATABASES["default"]["TEST"] = {"NAME": f"test_{_NAME}_{os.getpid()}"}  # noqa: F405

if CACHES["default"]["BACKEND"].endswith("RedisCache"):  # noqa: F405
    # Redis is shared with other runs on the machine: keep this run's keys apart.
    CACHES["default"]["KEY_PREFIX"] = f"rojo-test-{os.getpid()}"  # noqa: F405
