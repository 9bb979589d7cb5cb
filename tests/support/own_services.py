"""A Redis and a PostgreSQL of a test's own, on ports of their own, for outage tests to stop
and start again. The shared services (5432, 6379) are never touched."""

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

# A start or stop on a loaded machine (four workers on two cores).
START_TIMEOUT = 60


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_port(port: int, up: bool, timeout: float = START_TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                is_up = True
        except OSError:
            is_up = False
        if is_up == up:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"port {port} did not go {'up' if up else 'down'}")
        time.sleep(0.05)


@dataclass
class OwnRedis:
    """A redis-server with no persistence: a restart forgets everything, as one that lost
    its memory does."""

    workdir: Path
    port: int = field(default_factory=free_port)
    process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        command = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1"]
        command += ["--save", "", "--appendonly", "no", "--dir", str(self.workdir)]
        log = (self.workdir / "redis.log").open("a")
        self.process = subprocess.Popen(command, stdout=log, stderr=log)
        _wait_port(self.port, up=True)

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=10)
        _wait_port(self.port, up=False)


@pytest.fixture
def own_redis(tmp_path) -> Iterator[OwnRedis]:
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed")
    redis = OwnRedis(tmp_path)
    redis.start()
    yield redis
    redis.kill()


PG_BIN = Path("/usr/lib/postgresql/15/bin")


@dataclass
class OwnPostgres:
    """A PostgreSQL cluster in a temporary directory, run as a user that is not root."""

    workdir: Path
    user: str | None
    port: int = field(default_factory=free_port)

    @property
    def url(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *command: str) -> None:
        prefix = ["runuser", "-u", self.user, "--"] if self.user else []
        subprocess.run([*prefix, *command], check=True, capture_output=True, timeout=60)

    def init(self) -> None:
        data = self.workdir / "data"
        data.mkdir()
        if self.user:
            shutil.chown(self.workdir, self.user)
            shutil.chown(data, self.user)
        self._run(str(PG_BIN / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust")

    def start(self) -> None:
        options = f"-p {self.port} -k {self.workdir} -c listen_addresses=127.0.0.1 -c fsync=off"
        log = str(self.workdir / "pg.log")
        self._run(
            str(PG_BIN / "pg_ctl"),
            "-D",
            str(self.workdir / "data"),
            "-o",
            options,
            "-l",
            log,
            "-w",
            "start",
        )

    def running(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                return True
        except OSError:
            return False

    def stop(self) -> None:
        self._run(
            str(PG_BIN / "pg_ctl"),
            "-D",
            str(self.workdir / "data"),
            "-m",
            "immediate",
            "-w",
            "stop",
        )
        _wait_port(self.port, up=False)


@pytest.fixture(scope="module")
def own_postgres() -> Iterator[OwnPostgres]:
    if not (PG_BIN / "initdb").exists():
        pytest.skip("PostgreSQL 15's initdb is not installed")
    user = None
    if os.geteuid() == 0:
        try:
            import pwd

            user = pwd.getpwnam("postgres").pw_name
        except KeyError:
            pytest.skip("running as root with no postgres user to run PostgreSQL as")
    # Not under pytest's own temporary directory, which only root may enter.
    workdir = Path(tempfile.mkdtemp(prefix="rojo-test-pg-"))
    postgres = OwnPostgres(workdir, user)
    postgres.init()
    postgres.start()
    yield postgres
    with contextlib.suppress(subprocess.CalledProcessError, RuntimeError):
        postgres.stop()
    shutil.rmtree(workdir, ignore_errors=True)
