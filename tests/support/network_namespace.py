"""A network namespace of a test's own, for containers on networks of their own.

A Podman network adds and removes interfaces (a bridge, a veth pair a container) on the host it
is made on, and Chromium, driving the browser tests beside these, aborts the page loads under
way on any such change (net::ERR_NETWORK_CHANGED). Made inside a namespace of the test's, they
exist only there: the host's interfaces never change, and its ports (80, 443) stay free.

Podman runs in it under `nsenter --net`, which changes the network namespace alone: `ip netns
exec` would also give each command a mount namespace of its own, and the mounts one Podman
command makes (a container's root, its namespace files) must be seen by the next. The test's
own clients and servers enter it by thread (`entered`), as a network namespace is a thread's:
a socket made there stays there, whichever thread uses it later.
"""

import contextlib
import ctypes
import os
import secrets
import shutil
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass

CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


def _setns(fd: int) -> None:
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"setns: {os.strerror(errno)}")


@dataclass(frozen=True)
class NetworkNamespace:
    name: str

    @property
    def path(self) -> str:
        return f"/run/netns/{self.name}"

    def command(self, *args: str) -> list[str]:
        """`args` as a command run in this namespace."""
        return ["nsenter", f"--net={self.path}", *args]

    @contextlib.contextmanager
    def entered(self) -> Iterator[None]:
        """The calling thread in this namespace (its new sockets, the processes it starts)."""
        own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        target = os.open(self.path, os.O_RDONLY)
        try:
            _setns(target)
            try:
                yield
            finally:
                _setns(own)
        finally:
            os.close(target)
            os.close(own)

    def pids(self) -> list[int]:
        done = subprocess.run(["ip", "netns", "pids", self.name], capture_output=True, text=True)
        return [int(pid) for pid in done.stdout.split()]


def network_namespace_missing() -> str | None:
    """Why no namespace can be made here, if so."""
    if os.geteuid() != 0:
        return "making a network namespace needs root"
    missing = [tool for tool in ("ip", "nsenter") if not shutil.which(tool)]
    return f"missing {' and '.join(missing)} (iproute2, util-linux)" if missing else None


@contextlib.contextmanager
def network_namespace(prefix: str) -> Iterator[NetworkNamespace]:
    """A new namespace with its loopback up; deleted afterwards with the processes that were
    still in it (all started in it by the test: Podman's conmon, aardvark-dns)."""
    namespace = NetworkNamespace(f"{prefix}-{os.getpid()}-{secrets.token_hex(3)}")
    subprocess.run(["ip", "netns", "add", namespace.name], check=True, capture_output=True)
    try:
        subprocess.run(
            ["ip", "-n", namespace.name, "link", "set", "lo", "up"],
            check=True, capture_output=True,
        )  # fmt: skip
        yield namespace
    finally:
        for pid in namespace.pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        subprocess.run(["ip", "netns", "delete", namespace.name], capture_output=True)
