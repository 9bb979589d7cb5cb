"""The image, built once per test session with a real container runtime (Podman).

No registry is reachable here, so the official base cannot be pulled: the base is made
locally with Debian's debootstrap and python3.11 (kept as localhost/rojo-test-base:bookworm
for later runs), and the app's wheels come from the host (deploy/fetch_wheels.py), as a
build without PyPI does it. ROJO_REQUIRE_IMAGE=1 (CI) fails where Podman is missing instead
of skipping.
"""

import contextlib
import fcntl
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx2
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
BASE = "localhost/rojo-test-base:bookworm"
IMAGE = "localhost/rojo:test"
MIRROR = "http://deb.debian.org/debian"
# Podman's default runtime (crun) fails on these machines' resource limits, and a limit at or
# above the host's own cannot be set from inside their user namespace.
RUNTIME = ["--runtime", "runc"]
LIMITS = ["--ulimit", "nofile=16384:16384", "--ulimit", "nproc=4096:4096"]
# Every container and build step on the host's network: a network of Podman's own adds and
# removes interfaces on the host, and Chromium then aborts the pages' requests under way
# (net::ERR_NETWORK_CHANGED) in the browser tests running beside these.
HOST_NETWORK = ["--network", "host"]
START_SECONDS = 180


def podman(*args: str, check: bool = True, timeout: float = 900) -> subprocess.CompletedProcess:
    runtime = RUNTIME if shutil.which("runc") else []
    done = subprocess.run(
        ["podman", *runtime, *args], capture_output=True, text=True, timeout=timeout
    )
    if check and done.returncode:
        raise AssertionError(f"podman {' '.join(args)[:200]}: {done.stderr[-3000:]}")
    return done


def _base_build() -> None:
    """A Debian bookworm root with python3.11 and its venv module, imported as BASE."""
    with tempfile.TemporaryDirectory(prefix="rojo-base-") as work:
        root = Path(work) / "root"
        subprocess.run(
            ["debootstrap", "--variant=minbase", "bookworm", str(root), MIRROR],
            check=True, capture_output=True, timeout=900,
        )  # fmt: skip
        subprocess.run(
            ["chroot", str(root), "apt-get", "install", "-y", "-qq", "--no-install-recommends",
             "python3.11", "python3.11-venv", "ca-certificates"],
            check=True, capture_output=True, timeout=900,
        )  # fmt: skip
        subprocess.run(["chroot", str(root), "apt-get", "clean"], check=True)
        tar = subprocess.Popen(["tar", "-C", str(root), "-c", "."], stdout=subprocess.PIPE)
        subprocess.run(
            ["podman", "import", "-", BASE], stdin=tar.stdout, check=True, capture_output=True
        )
        tar.wait()


def base_ensure() -> None:
    """BASE, made if this machine has none yet (it is kept for later runs)."""
    if podman("image", "exists", BASE, check=False).returncode != 0:
        _base_build()


def image_build() -> str:
    base_ensure()
    version = podman(
        "run", "--rm", *LIMITS, *HOST_NETWORK, BASE, "python3.11", "-c",
        "import platform; print(platform.python_version())",
    ).stdout.strip()  # fmt: skip
    subprocess.run(
        [sys.executable, str(ROOT / "deploy" / "fetch_wheels.py"), version],
        check=True, capture_output=True, timeout=600,
    )  # fmt: skip
    revision = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    podman(
        "build", *LIMITS, *HOST_NETWORK, "--format", "docker", "--build-arg", f"BASE={BASE}",
        "--build-arg", "PIP_OPTIONS=--no-index --find-links /src/deploy/wheels",
        "--build-arg", "VERSION=test", "--build-arg", f"REVISION={revision or 'unknown'}",
        "-t", IMAGE, str(ROOT),
    )  # fmt: skip
    return IMAGE


@pytest.fixture(scope="session")
def image(tmp_path_factory, worker_id) -> str:
    """The image's tag, built from this checkout once per run: the first of the workers that
    need it builds it, the others wait for that build (two at once would build it twice)."""
    if not shutil.which("podman") or not shutil.which("debootstrap"):
        if os.environ.get("ROJO_REQUIRE_IMAGE"):
            pytest.fail("ROJO_REQUIRE_IMAGE is set but podman or debootstrap is missing")
        pytest.skip("the image tests need podman and debootstrap")
    run_dir = tmp_path_factory.getbasetemp()
    if worker_id != "master":
        run_dir = run_dir.parent  # the run's, shared by its workers
    built = run_dir / "rojo-image-built"
    try:
        with open(run_dir / "rojo-image.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not built.exists():
                image_build()
                built.touch()
        return IMAGE
    except subprocess.CalledProcessError as exc:
        pytest.fail(f"{exc.cmd[:3]} failed:\n{exc.stdout}\n{exc.stderr}"[-6000:])
    except AssertionError as exc:
        pytest.fail(str(exc))


def compose_config(env_file: Path) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "podman_compose", "--env-file", str(env_file)]
    command += ["-f", str(DEPLOY / "compose.yaml"), "config"]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, cwd=DEPLOY)


def env_file(tmp_path: Path, **values: str) -> Path:
    """The example env file with `values` set, as a team fills it in (those it does not list
    are added at its end)."""
    lines = []
    for line in (DEPLOY / "rojo.env.example").read_text().splitlines():
        name = line.split("=", 1)[0]
        lines.append(f"{name}={values.pop(name)}" if name in values else line)
    lines += [f"{name}={value}" for name, value in values.items()]
    path = tmp_path / "rojo.env"
    path.write_text("\n".join(lines) + "\n")
    return path


def compose_app(tmp_path: Path) -> dict:
    """deploy/compose.yaml's first app service, as compose resolves it with a filled env file."""
    filled = env_file(tmp_path, SECRET_KEY="k" * 50, POSTGRES_PASSWORD="pg-secret")
    done = compose_config(filled)
    assert done.returncode == 0, done.stderr
    return yaml.safe_load(done.stdout)["services"]["app1"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Container:
    """One running container of the image, on the host's network."""

    name: str
    port: int
    started: list[str] = field(default_factory=list)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def logs(self) -> str:
        found = podman("logs", self.name, check=False)
        return found.stdout + found.stderr

    def manage(self, *args: str) -> str:
        return podman("exec", self.name, "python", "/app/manage.py", *args).stdout.strip()

    def wait_ready(self) -> None:
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx2.TransportError):  # not listening yet
                if httpx2.get(self.base_url + "/readyz", timeout=2).status_code == 200:
                    return
            state = podman("inspect", "-f", "{{.State.Running}}", self.name, check=False)
            if state.stdout.strip() == "false":
                break
            time.sleep(0.5)
        raise AssertionError(f"container {self.name} did not get ready:\n{self.logs()[-4000:]}")

    def stop(self, timeout: int = 20) -> None:
        """SIGTERM, as an orchestrator stops a container; SIGKILL after `timeout` seconds."""
        podman("stop", "-t", str(timeout), self.name, check=False, timeout=timeout + 60)

    def restart(self, timeout: int = 40) -> None:
        """Stop it (gracefully), start it again, wait until it is ready."""
        self.stop(timeout)
        podman("start", self.name)
        self.wait_ready()


@pytest.fixture
def containers(image) -> Iterator:
    """Start containers of the image (`start(volume, **env)`); all are removed after the test."""
    names: list[str] = []
    volumes: set[str] = set()

    def start(
        volume: str, *, wait: bool = True, mounts: dict[str, str] | None = None, **env: str
    ) -> Container:
        """A container with `volume` at /data (and `mounts`: volume → path) and `env`."""
        name = f"rojo-test-{os.getpid()}-{len(names)}-{time.monotonic_ns()}"
        port = free_port()
        environment = [f"--env={key}={value}" for key, value in {"PORT": port, **env}.items()]
        mounted = {volume: "/data", **(mounts or {})}
        options = [f"--volume={name}:{path}" for name, path in mounted.items()]
        podman(
            "run", "-d", "--name", name, *LIMITS, *HOST_NETWORK, *options,
            *environment, image,
        )  # fmt: skip
        names.append(name)
        volumes.update(mounted)
        container = Container(name, port)
        if wait:
            container.wait_ready()
        return container

    yield start
    for name in names:
        podman("rm", "-f", "-t", "5", name, check=False)
    for volume in volumes:
        podman("volume", "rm", "-f", volume, check=False)
