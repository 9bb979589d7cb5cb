"""deploy/compose.yaml started whole, as the README's production quick start starts it.

`podman-compose --env-file deploy/rojo.env -f deploy/compose.yaml up -d`, run from a directory
holding copies of deploy/compose.yaml and deploy/Caddyfile beside the test's rojo.env (the
checkout's deploy/rojo.env is a team's own). Everything runs in a network namespace of the
test's (tests/support/network_namespace.py says why), under a project name of its own, so that
neither a team's `rojo` stack on the same machine nor another run is ever touched; Podman is
told its runtime and limits by a containers.conf of the test's (tests/support/image_build.py
says why they are needed here), as compose passes no options of its own to it.
"""

import contextlib
import json
import os
import shutil
import ssl
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx2

from tests.support.image_build import DEPLOY
from tests.support.network_namespace import NetworkNamespace

START_SECONDS = 300
# The services with a healthcheck: compose.yaml's (postgres) and the image's (app1, app2).
CHECKED = ("postgres", "app1", "app2")
CADDY_ROOT = "/data/caddy/pki/authorities/local/root.crt"
CONTAINERS_CONF = """\
[containers]
default_ulimits = ["nofile=16384:16384", "nproc=4096:4096"]

[engine]
runtime = "runc"
"""


def stack_directory(path: Path, env_file: Path) -> Path:
    """`path` with deploy/ as a checkout has it, and `env_file` as deploy/rojo.env."""
    deploy = path / "deploy"
    deploy.mkdir(parents=True)
    for name in ("compose.yaml", "Caddyfile"):
        shutil.copy(DEPLOY / name, deploy / name)
    shutil.copy(env_file, deploy / "rojo.env")
    (path / "containers.conf").write_text(CONTAINERS_CONF)
    return path


@dataclass
class Stack:
    directory: Path  # stack_directory's
    project: str
    namespace: NetworkNamespace

    @property
    def environment(self) -> dict[str, str]:
        # Nothing of the test's own environment: compose would take its variables first.
        return {
            "PATH": "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin",
            "HOME": os.environ.get("HOME", "/root"),
            "CONTAINERS_CONF": str(self.directory / "containers.conf"),
            "COMPOSE_PROJECT_NAME": self.project,
        }

    def compose(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
        """The README's command with `args` (`up -d`, `down`, ...)."""
        command = self.namespace.command(
            sys.executable, "-m", "podman_compose",
            "--env-file", "deploy/rojo.env", "-f", "deploy/compose.yaml", *args,
        )  # fmt: skip
        return subprocess.run(
            command, cwd=self.directory, env=self.environment,
            capture_output=True, text=True, timeout=timeout,
        )  # fmt: skip

    def up(self) -> None:
        done = self.compose("up", "-d")
        assert done.returncode == 0, f"up failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        self.wait_ready()

    def down(self, *, volumes: bool = False) -> subprocess.CompletedProcess:
        return self.compose("down", *(["-v"] if volumes else []))

    def podman(self, *args: str, check: bool = True, timeout: float = 120):
        done = subprocess.run(
            self.namespace.command("podman", *args), env=self.environment,
            capture_output=True, text=True, timeout=timeout,
        )  # fmt: skip
        if check and done.returncode:
            raise AssertionError(f"podman {' '.join(args)[:200]}: {done.stderr[-3000:]}")
        return done

    def containers(self) -> dict[str, dict]:
        """The project's containers by service: podman's `ps` of each, stopped ones too."""
        listed = self.podman(
            "ps", "-a", "--format", "json", "--filter",
            f"label=io.podman.compose.project={self.project}",
        ).stdout  # fmt: skip
        found = {}
        for container in json.loads(listed or "[]"):
            found[container["Labels"]["io.podman.compose.service"]] = container
        return found

    def container(self, service: str) -> str:
        return self.containers()[service]["Names"][0]

    def logs(self) -> str:
        parts = []
        for service, container in sorted(self.containers().items()):
            done = self.podman("logs", "--tail", "40", container["Names"][0], check=False)
            parts.append(f"--- {service} ({container['State']}):\n{done.stdout}{done.stderr}")
        return "\n".join(parts)

    def manage(self, *args: str) -> str:
        return self.podman(
            "exec", self.container("app1"), "python", "/app/manage.py", *args
        ).stdout.strip()

    def wait_ready(self) -> None:
        """Every healthcheck passes (run here: Podman runs them on a timer only under
        systemd), Caddy has its local CA, and /readyz answers 200 through the proxy."""
        deadline = time.monotonic() + START_SECONDS
        waiting = set(CHECKED)
        while waiting:
            names = {service: c["Names"][0] for service, c in self.containers().items()}
            for service in sorted(waiting & set(names)):
                if self.podman("healthcheck", "run", names[service], check=False).returncode == 0:
                    waiting.discard(service)
            self._before(deadline, f"not healthy: {sorted(waiting)}")
        while self.podman("exec", self.container("proxy"), "test", "-s", CADDY_ROOT,
                          check=False).returncode:  # fmt: skip
            self._before(deadline, "Caddy made no local CA")
        with self.namespace.entered(), self.client() as client:
            while True:
                with contextlib.suppress(httpx2.TransportError):
                    if client.get("/readyz").status_code == 200:
                        return
                self._before(deadline, "/readyz did not answer 200 through the proxy")

    def _before(self, deadline: float, failure: str) -> None:
        if time.monotonic() > deadline:
            raise AssertionError(f"{failure}\n{self.logs()}")
        time.sleep(1)

    def client(self, **options) -> httpx2.Client:
        """A client of https://localhost that trusts Caddy's local CA and nothing else; make
        and use it inside `namespace.entered()`."""
        root = self.podman("exec", self.container("proxy"), "cat", CADDY_ROOT).stdout
        context = ssl.create_default_context(cadata=root)
        return httpx2.Client(base_url="https://localhost", verify=context, timeout=30, **options)

    def remove(self) -> list[str]:
        """`down -v`, and whatever it left of the project (it goes on past failures); returns
        what had to be removed after it."""
        self.down(volumes=True)
        left = []
        for container in self.containers().values():
            left.append(container["Names"][0])
            self.podman("rm", "-f", "-t", "0", container["Names"][0], check=False)
        for kind in ("volume", "network", "pod"):
            listed = self.podman(kind, "ls", "--format", "{{.Name}}", check=False).stdout
            for name in listed.split():
                if name.startswith(f"{self.project}_") or name == f"pod_{self.project}":
                    left.append(name)
                    self.podman(kind, "rm", "-f", name, check=False)
        return left
