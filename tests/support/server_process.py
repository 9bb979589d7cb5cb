"""More server processes on the test database (and Redis, when REDIS_URL is set).

Each is a uvicorn subprocess of the real app: another node of a multi-process deployment, and
one a test can kill with SIGKILL mid-turn. It shares the database with the in-process
`asgi_server`, and the storage directory it is given.
"""

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from urllib.parse import quote

import httpx2
import pytest
from django.conf import settings as django_settings

# Starts only: a loaded machine (four workers on two cores) can take long to import the app.
START_TIMEOUT = 90


def database_url() -> str:
    """The test database as a DATABASE_URL, for a process that reads its settings from env."""
    db = django_settings.DATABASES["default"]
    if db["ENGINE"] == "roject.server.sqlite_backend":
        return f"sqlite:///{db['NAME']}"
    credentials = quote(db["USER"] or "", safe="")
    if db.get("PASSWORD"):
        credentials += ":" + quote(db["PASSWORD"], safe="")
    host = f"{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}"
    return f"postgres://{credentials}@{host}/{quote(db['NAME'], safe='')}"


BIND_TRIES = 3


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class ServerProcess:
    """A running server subprocess and its base URL."""

    base_url: str
    process: subprocess.Popen
    log_path: Path
    storage_dir: Path | None = None
    log_start: int = 0  # in bytes: a shared server's log, from where a test took it

    def log(self) -> str:
        return self.log_path.read_bytes()[self.log_start :].decode(errors="replace")

    def kill(self) -> None:
        """SIGKILL: no handler runs, nothing is cleaned up, as in a crash or an OOM kill."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()


def server_start(
    *, storage_dir: Path, log_path: Path, server: str = "uvicorn", **env: str
) -> ServerProcess:
    """Start the app on a free port with `env` added; return once it answers requests.

    `server` is uvicorn with httptools (the production command), `serve` (the image's
    command: the same under a graceful stop), or daphne. A port taken between its choice
    and the bind (by another worker's connection, say) is chosen again."""
    for tries_left in reversed(range(BIND_TRIES)):
        started = _launch(storage_dir=storage_dir, log_path=log_path, server=server, **env)
        try:
            _wait_ready(started)
            started.storage_dir = storage_dir
            return started
        except BaseException:
            started.kill()
            if tries_left and "address already in use" in started.log():
                continue
            raise
    raise AssertionError("unreachable")


def _launch(*, storage_dir: Path, log_path: Path, server: str, **env: str) -> ServerProcess:
    port = _free_port()
    full_env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "roject.settings",
        "SECRET_KEY": django_settings.SECRET_KEY,
        "DATABASE_URL": database_url(),
        "ROJO_STORAGE_DIR": str(storage_dir),
        "SECURE_SSL_REDIRECT": "0",
        "SESSION_COOKIE_SECURE": "0",
        "CSRF_COOKIE_SECURE": "0",
        "SECURE_HSTS_SECONDS": "0",
        # As the in-process server's (tests.settings, or a test's own): no forming-call
        # deltas in the sequences of events the tests expect, unless a test asks for them.
        "ROJO_TOOL_DELTA_SECONDS": str(django_settings.ROJO_TOOL_DELTA_SECONDS),
        **env,
    }
    if server == "serve":  # the image's command: migrations, the doctor, a graceful stop
        command = [sys.executable, "manage.py", "serve"]
        full_env |= {"PORT": str(port), "ROJO_ADMIN_PASSWORD": "not-a-fixed-password-42"}
    elif server == "daphne":
        command = [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port)]
        command += ["roject.asgi:application"]
    else:
        command = [sys.executable, "-m", "uvicorn", "roject.asgi:application", "--http"]
        command += ["httptools", "--host", "127.0.0.1", "--port", str(port), "--lifespan", "off"]
    with log_path.open("w") as log:
        process = subprocess.Popen(
            command, cwd=django_settings.BASE_DIR, env=full_env, stdout=log, stderr=log
        )
    return ServerProcess(f"http://127.0.0.1:{port}", process, log_path)


def _wait_ready(server: ServerProcess) -> None:
    """Wait for an answer on the port from this process's own listener.

    Another xdist worker may have been handed the same free port: its server would answer
    first, from another database, while this one dies with "address already in use"; a
    test talking to it gets 401s for tokens it never heard of."""
    deadline = time.monotonic() + START_TIMEOUT
    port = int(server.base_url.rsplit(":", 1)[1])
    while True:
        if server.process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("the server process did not start:\n" + server.log())
        try:
            answered = httpx2.get(server.base_url + "/api/projects", timeout=1).status_code
        except httpx2.TransportError:
            answered = None
        if answered == 401 and listens(pid=server.process.pid, port=port):
            return
        time.sleep(0.1)


def listens(*, pid: int, port: int) -> bool:
    """Whether `pid` holds a socket listening on `port` (Linux's /proc; elsewhere, trusted)."""
    if not Path("/proc/self/net/tcp").exists():
        return True
    tables = [Path(f"/proc/{pid}/net/tcp"), Path(f"/proc/{pid}/net/tcp6")]
    inodes = set()
    for table in tables:
        try:
            rows = table.read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:
                inodes.add(f"socket:[{inode}]")
    try:
        fds = list(Path(f"/proc/{pid}/fd").iterdir())
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(fd) in inodes:
                return True
        except OSError:
            continue
    return False


@pytest.fixture
def server_process(
    transactional_db, storage_dir, tmp_path
) -> Iterator[Callable[..., ServerProcess]]:
    """Start server processes on the test's database and storage dir; all end with the test.

    Call it with environment variables to add (ROJO_TURN_STALE_SECONDS="1", ...). Depending
    on `transactional_db` makes them end before the database is flushed.
    """
    started: list[ServerProcess] = []

    def start(server: str = "uvicorn", **env: str) -> ServerProcess:
        log_path = tmp_path / f"server-{len(started) + 1}.log"
        server = server_start(storage_dir=storage_dir, log_path=log_path, server=server, **env)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture(scope="module")
def _module_server(request, django_db_setup, tmp_path_factory) -> Iterator[ServerProcess]:
    workdir = tmp_path_factory.mktemp("module-server")
    (workdir / "storage").mkdir()
    env = getattr(request.module, "MODULE_SERVER_ENV", {})
    server = server_start(storage_dir=workdir / "storage", log_path=workdir / "server.log", **env)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def module_server(_module_server, transactional_db, storage_dir, settings) -> ServerProcess:
    """One server process for all of a module's tests that take it (its settings from the
    module's MODULE_SERVER_ENV), for tests that need a real server but not one of their own:
    a start costs seconds of CPU, and the suite made one per test. Each test's rows are its
    own (the database is flushed between tests, ids are never reused) and so are its
    projects' roots, under the server's storage dir, which the test's settings name too,
    and its log: `log()` reads what the server wrote since the test took it."""
    settings.ROJO_STORAGE_DIR = _module_server.storage_dir
    return replace(_module_server, log_start=_module_server.log_path.stat().st_size)


@pytest.fixture(scope="module")
def second_server(django_db_setup, tmp_path_factory) -> Iterator[str]:
    """Another server process on the same database and Redis; yields its base URL."""
    if not os.environ.get("REDIS_URL"):
        pytest.skip("set REDIS_URL (and DATABASE_URL) to run the cross-process approval tests")
    workdir = tmp_path_factory.mktemp("second-server")
    server = server_start(storage_dir=workdir / "storage", log_path=workdir / "server.log")
    try:
        yield server.base_url
    finally:
        server.stop()
