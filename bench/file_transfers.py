"""Uploads and downloads in constant memory: a 200 MB upload and a 200 MB folder download.

`python -m bench.file_transfers [--mb 200]` starts the app in a process of its own (as in
production), uploads one file of that size streamed from the client, then downloads a folder
of that size as a .zip, reading it as it comes, while the server's resident memory (VmRSS)
is sampled every 20 ms. Each must raise it by at most LIMIT_MIB over what it was before;
the script prints the figures and exits 1 if either does not hold.
"""

import argparse
import os
import shutil
import sys
import threading
import time

LIMIT_MIB = 8
BLOCK = 1 << 20


class RssPeak:
    """The largest VmRSS of a process seen while the block runs, in KiB."""

    def __init__(self, server) -> None:
        self.server, self.peak, self._stop = server, 0, threading.Event()

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.server.memory_kib()["VmRSS"])
            time.sleep(0.02)

    def __enter__(self) -> "RssPeak":
        self.before = self.server.memory_kib()["VmRSS"]
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def growth_mib(self) -> float:
        return (self.peak - self.before) / 1024


def _client(server, fixtures):
    import httpx2
    from django.conf import settings

    return httpx2.Client(
        base_url=f"http://{server.host}:{server.port}",
        cookies={
            settings.SESSION_COOKIE_NAME: fixtures.session_key,
            settings.CSRF_COOKIE_NAME: fixtures.csrf_token,
        },
        headers={"X-CSRFToken": fixtures.csrf_token},
        timeout=300,
    )


def _upload(client, project_id: int, megabytes: int, name: str = "warm-up.bin") -> None:
    block = os.urandom(BLOCK)
    response = client.post(
        f"/api/projects/{project_id}/files/upload",
        params={"path": name},
        content=(block for _ in range(megabytes)),
        headers={"Content-Type": "application/octet-stream"},
    )
    response.raise_for_status()


def _folder_create(root, megabytes: int) -> None:
    folder = root / "folder"
    folder.mkdir()
    for number in range(megabytes // 10):
        with (folder / f"part-{number:03d}.bin").open("wb") as fh:
            for _ in range(10):
                fh.write(os.urandom(BLOCK))


def _download(client, project_id: int) -> int:
    size = 0
    url = f"/api/projects/{project_id}/files/download"
    with client.stream("GET", url, params={"path": "folder"}) as response:
        response.raise_for_status()
        for piece in response.iter_bytes():
            size += len(piece)
    return size


def main(argv: list[str] | None = None) -> int:
    from . import env

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=200)
    args = parser.parse_args(argv)
    scratch = env.scratch_dir()
    env.setup(scratch)
    environ = env.bench_environ(scratch)
    environ["ROJO_UPLOAD_MAX_FILE_BYTES"] = environ["ROJO_UPLOAD_MAX_BYTES"] = str(2**40)
    from roject import storage

    from .server import server_start

    fixtures = env.fixtures_create()
    project = env.project_new("transfers")
    server = server_start(environ, scratch / "server.log")
    failed = False
    try:
        client = _client(server, fixtures)
        _upload(client, project.pk, 1)  # the first request loads what the app loads once
        with RssPeak(server) as upload:
            started = time.monotonic()
            _upload(client, project.pk, args.mb, name="big.bin")
            upload_seconds = time.monotonic() - started
        root = storage.project_root(project.pk)
        _folder_create(root, args.mb)
        _download(client, project.pk)  # once to warm up, as above
        with RssPeak(server) as download:
            started = time.monotonic()
            size = _download(client, project.pk)
            download_seconds = time.monotonic() - started
        for name, figure, seconds in (
            (f"upload of {args.mb} MB", upload, upload_seconds),
            (
                f"download of a {args.mb} MB folder ({size / 2**20:.0f} MiB)",
                download,
                download_seconds,
            ),
        ):
            held = figure.growth_mib <= LIMIT_MIB
            failed |= not held
            print(
                f"{name}: server RSS {figure.before / 1024:.0f} MiB, +{figure.growth_mib:.1f} MiB "
                f"at most (limit {LIMIT_MIB}), {seconds:.1f} s: {'ok' if held else 'OVER'}"
            )
    finally:
        server.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
