"""An upload is decided from its headers before its body is read, and its body is bounded
as it streams.

Before, `POST …/files/upload` with no cookie and a chunked body of hundreds of MiB was
answered 403 only once Django had spooled all of it to the temporary directory. Each test
here sends a chunked body by hand over a socket to the live ASGI server, so it sees how much
went out before the server answered, and measures what the server holds in its temporary
directory meanwhile (the files it has open there: Django's spool is unlinked as it is made).
"""

import contextlib
import io
import json
import os
import select
import socket
import tempfile
import zipfile
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from roject.identity.tokens import TOKEN_PREFIX
from roject.storage import project_root_create
from tests.support.helpers import files_in
from tests.support.live_server import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

KIB, MIB = 1 << 10, 1 << 20
OFFERED = 64 * MIB  # what each refused client tries to send


class Spool:
    """The bytes this process (the live server's) holds in a temporary directory."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.peak = 0  # the most measured over what it held when this count began
        self.base = self.size()

    def size(self) -> int:
        total = sum(path.stat().st_size for path in self.directory.iterdir())
        for fd in os.listdir("/proc/self/fd"):
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/self/fd/{fd}").startswith(f"{self.directory}/"):
                    total += os.stat(f"/proc/self/fd/{fd}").st_size
        return total

    def measure(self) -> None:
        self.peak = max(self.peak, self.size() - self.base)


@pytest.fixture
def spool(tmp_path, settings, monkeypatch) -> Spool:
    """Django's spool of request bodies in a directory of the test's, from the first 64 KiB."""
    directory = tmp_path / "spool"
    directory.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(directory))
    settings.FILE_UPLOAD_MAX_MEMORY_SIZE = 64 * KIB
    return Spool(directory)


class RawUpload:
    """One upload sent chunk by chunk over its own connection."""

    def __init__(
        self, base_url: str, project, *, client=None, headers=None, query="", spelled=None
    ) -> None:
        address = urlsplit(base_url)
        self.sock = socket.create_connection((address.hostname, address.port), timeout=15)
        self.sent = 0
        lines = [
            f"POST /api/projects/{spelled or project.pk}/files/upload?path=big.bin{query} HTTP/1.1",
            f"Host: {address.netloc}",
            "Content-Type: application/octet-stream",
            "Transfer-Encoding: chunked",
        ]
        if client is not None:
            jar = "; ".join(f"{name}={value}" for name, value in client.http.cookies.items())
            lines += [f"Cookie: {jar}", f"X-CSRFToken: {client.http.headers['X-CSRFToken']}"]
        lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())

    def send(self, total: int, *, chunk: int = 64 * KIB, watch=None) -> None:
        """Send up to `total` bytes more, stopping as soon as the server has answered."""
        frame = b"%x\r\n%s\r\n" % (chunk, b"x" * chunk)
        goal = self.sent + total
        while self.sent < goal:
            readable, writable, _ = select.select([self.sock], [self.sock], [], 15)
            if readable:
                return
            assert writable, "the server neither read the body nor answered"
            try:
                self.sock.sendall(frame)
            except OSError:  # it answered and closed meanwhile
                return
            self.sent += chunk
            if watch is not None and self.sent % MIB == 0:
                watch()

    def finish(self) -> None:
        self.sock.sendall(b"0\r\n\r\n")

    def response(self) -> tuple[int, dict, bool]:
        """The status, the JSON body, and whether the server then closed the connection."""
        data = b""
        while b"\r\n\r\n" not in data:
            data += self._recv()
        head, _, body = data.partition(b"\r\n\r\n")
        length = next(
            int(line.split(b":", 1)[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        while len(body) < length:
            body += self._recv()
        try:
            closed = self.sock.recv(1) == b""
        except ConnectionResetError:
            closed = True
        self.sock.close()
        parsed = json.loads(body) if body.startswith(b"{") else body.decode()
        return int(head.split(b" ", 2)[1]), parsed, closed

    def _recv(self) -> bytes:
        chunk = self.sock.recv(65536)
        assert chunk, "the connection closed before a whole response"
        return chunk


def _nothing_kept(project) -> None:
    root = project_root_create(project.pk)
    incoming = root.parent / "incoming"
    assert files_in(root) == {} and (not incoming.exists() or not list(incoming.iterdir()))


def _refused(asgi_server, project, spool: Spool, **kwargs) -> tuple[int, dict]:
    spool = Spool(spool.directory)  # counted from what other uploads hold now
    upload = RawUpload(asgi_server, project, **kwargs)
    upload.send(OFFERED, watch=spool.measure)
    status, body, closed = upload.response()
    spool.measure()
    assert upload.sent < OFFERED // 2, "the client sent most of its body before the answer"
    assert spool.peak < 64 * KIB, "the refused body was spooled to disk"
    assert closed, "the server kept the connection open, to drain the body"
    return status, body


def test_a_logged_out_upload_is_refused_before_its_body_is_read(asgi_server, project, spool):
    """No cookie at all: the CSRF check refuses it (403), from the headers."""
    status, body = _refused(asgi_server, project, spool)
    assert status == 403 and "CSRF" in body["detail"]
    _nothing_kept(project)


@pytest.mark.parametrize(
    ("who", "status"),
    [("anonymous", 401), ("viewer", 403), ("outsider", 404), ("editor-without-csrf", 403)],
)
def test_uploads_not_allowed_are_refused_before_their_body_is_read(
    asgi_server, client_for, users, project, spool, who, status
):
    """The session's user, its CSRF token and the user's role decide, as for the upload
    itself: the same answers as the view gives, before any of the body is read."""
    name = who.removesuffix("-without-csrf")
    client = client_for(None if name == "anonymous" else users[name])
    if who.endswith("-without-csrf"):
        client.http.headers["X-CSRFToken"] = "wrong" * 8
    assert _refused(asgi_server, project, spool, client=client)[0] == status


@pytest.mark.parametrize("spelling", ["+{pk}", "{pk}.0", "0{pk}_0"])
def test_an_upload_to_another_spelling_of_the_project_is_not_found(
    asgi_server, client_for, users, project, spool, spelling
):
    """The gate decides for the upload's path as Django routes it: a project id spelled so
    that a lax integer parse would take it (`+1`, `1.0`, `1_0`) reaches no upload at all."""
    upload = RawUpload(
        asgi_server,
        project,
        client=client_for(users["editor"]),
        spelled=spelling.format(pk=project.pk),
    )
    upload.send(64 * KIB)
    upload.finish()
    status, _, _ = upload.response()
    assert status == 404
    _nothing_kept(project)


def test_a_bad_api_token_is_refused_before_the_body_is_read(asgi_server, project, spool):
    headers = {"Authorization": f"Bearer {TOKEN_PREFIX}not-a-token"}
    status, body = _refused(asgi_server, project, spool, headers=headers)
    assert status == 401 and "not valid" in body["detail"]


def test_an_allowed_upload_goes_through(asgi_server, client_for, users, project, spool):
    """The editor's chunked upload is read and written whole, as before."""
    upload = RawUpload(asgi_server, project, client=client_for(users["editor"]))
    upload.send(3 * MIB)
    upload.finish()
    status, body, _ = upload.response()
    assert status == 200, body
    root = project_root_create(project.pk)
    assert (root / "big.bin").read_bytes() == b"x" * 3 * MIB
    assert spool.size() == 0


def test_a_file_over_its_limit_is_cut_as_it_streams(
    asgi_server, client_for, users, project, spool, settings
):
    """ROJO_UPLOAD_MAX_FILE_BYTES is counted on the wire: 413 once it is passed, the spool
    never over it and removed, nothing kept."""
    settings.ROJO_UPLOAD_MAX_FILE_BYTES = 2 * MIB
    upload = RawUpload(asgi_server, project, client=client_for(users["editor"]))
    upload.send(OFFERED, watch=spool.measure)
    status, body, closed = upload.response()
    assert status == 413 and "over the limit of 2,097,152 bytes" in body["detail"]
    assert upload.sent < OFFERED // 2 and closed
    assert spool.peak <= 2 * MIB  # never more than the limit on disk
    assert spool.size() == 0
    _nothing_kept(project)


def test_a_zip_to_unpack_keeps_the_per_upload_limit(client_for, users, project, settings):
    """An archive's body is limited by ROJO_UPLOAD_MAX_BYTES; each entry by the file limit."""
    settings.ROJO_UPLOAD_MAX_FILE_BYTES = MIB
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_STORED) as zipped:
        zipped.writestr("a.bin", os.urandom(700 * KIB))
        zipped.writestr("b.bin", os.urandom(700 * KIB))
    response = client_for(users["editor"]).post(
        f"/api/projects/{project.pk}/files/upload",
        params={"path": "in", "unpack": "true"},
        content=archive.getvalue(),
        headers={"Content-Type": "application/octet-stream"},
    )
    assert response.status_code == 200, response.text
    assert sorted(response.json()["extracted"]) == ["a.bin", "b.bin"]


def test_a_stalled_body_is_cut_and_its_spool_removed(
    asgi_server, client_for, users, project, spool, settings
):
    # Room to see the spool on disk before the cut: a loaded run's test process, paused for
    # the 2 s this once was, found the spool already cut and removed.
    settings.ROJO_UPLOAD_STALL_SECONDS = 5
    upload = RawUpload(asgi_server, project, client=client_for(users["editor"]))
    upload.send(MIB)
    # Received, on disk but for a file buffer (the body comes in pieces of any size, as the
    # machine's load cuts it: the last may wait in the buffer until the cut); then nothing.
    wait_until(lambda: spool.size() >= MIB - io.DEFAULT_BUFFER_SIZE)

    status, body, closed = upload.response()

    assert status == 408 and "sent nothing for 5 s" in body["detail"]
    assert closed
    assert spool.size() == 0
    _nothing_kept(project)


def _under_way(asgi_server, project, spool: Spool, client) -> RawUpload:
    """An upload let in and still sending, what it sent so far on disk: else the rest of it,
    landing while a refused upload is measured, counts as that one's (a red on a slow
    machine). Up to a file buffer of it may stay in memory."""
    upload = RawUpload(asgi_server, project, client=client)
    upload.send(256 * KIB)
    wait_until(lambda: spool.size() >= 256 * KIB - io.DEFAULT_BUFFER_SIZE)
    return upload


def test_a_users_uploads_in_flight_are_bounded(
    asgi_server, client_for, users, project, spool, settings
):
    settings.ROJO_UPLOAD_MAX_IN_FLIGHT = 1
    editor = client_for(users["editor"])
    first = _under_way(asgi_server, project, spool, editor)

    status, body = _refused(asgi_server, project, spool, client=editor)
    assert status == 429 and "from you" in body["detail"]

    first.finish()
    assert first.response()[0] == 200
    again = RawUpload(asgi_server, project, client=editor, query="&overwrite=true")
    again.send(64 * KIB)
    again.finish()
    assert again.response()[0] == 200  # its place was given back


def test_an_addresses_uploads_in_flight_are_bounded_refusals_included(
    asgi_server, client_for, users, project, spool, settings
):
    settings.ROJO_UPLOAD_MAX_IN_FLIGHT_PER_ADDRESS = 1
    first = _under_way(asgi_server, project, spool, client_for(users["editor"]))

    for client in (client_for(users["owner"]), client_for(None), None):
        status, body = _refused(asgi_server, project, spool, client=client)
        assert status == 429 and "from this address" in body["detail"]

    first.finish()
    assert first.response()[0] == 200
    owner = RawUpload(
        asgi_server, project, client=client_for(users["owner"]), query="&overwrite=true"
    )
    owner.send(64 * KIB)
    owner.finish()
    assert owner.response()[0] == 200  # the address's place was given back
