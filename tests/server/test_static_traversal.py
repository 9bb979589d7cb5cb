"""Traversal attempts on static URLs (plain, encoded, double-encoded, backslashes, NUL) answer
404 on the live server, with DEBUG on and off: never a 500, never a server path, never a file
from outside the static directories. The paths are sent raw, as an attacker would."""

import logging
import os
import socket
from urllib.parse import urlsplit

import pytest
from django.conf import settings as django_settings

pytestmark = pytest.mark.django_db

TRAVERSALS = [
    "/static/../roject/settings.py",
    "/static/rojo/../../roject/settings.py",
    "/static/%2e%2e/roject/settings.py",
    "/static/%2E%2E%2Froject%2Fsettings.py",
    "/static/..%2f..%2f..%2f..%2f..%2fetc%2fpasswd",
    "/static/%252e%252e/roject/settings.py",
    "/static/%252e%252e%252froject%252fsettings.py",
    "/static/rojo/%252e%252e/%252e%252e/roject/settings.py",
    "/static/..%5croject%5csettings.py",
    "/static/%255c..%255croject%255csettings.py",
    "/static/%2e%2e%2f%2e%2e%2f%2e%2e%2f%2e%2e%2fetc%2fpasswd",
    "/static//etc/passwd",
    "/static/%2fetc%2fpasswd",
    "/static/%252fetc%252fpasswd",
    "/static/rojo/chat.js%00.txt",
    "/static/rojo/chat.js%2500",
    "/static/%c0%ae%c0%ae/roject/settings.py",
    "/static/./../roject/settings.py",
    "/static/admin/../../../roject/settings.py",
]


def raw_get(base_url: str, path: str) -> tuple[int, bytes]:
    """GET `path` exactly as written (no client normalises it); the status and the body."""
    address = urlsplit(base_url)
    with socket.create_connection((address.hostname, address.port), timeout=15) as conn:
        conn.sendall(
            f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode()
        )
        data = b""
        while chunk := conn.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


@pytest.mark.parametrize("debug", [False, True], ids=["debug-off", "debug-on"])
@pytest.mark.parametrize("path", TRAVERSALS)
def test_a_traversal_on_a_static_url_answers_404(asgi_server, settings, caplog, debug, path):
    settings.DEBUG = debug
    caplog.set_level(logging.INFO)

    status, body = raw_get(asgi_server, path)

    assert status == 404, body[:2000]
    for leak in (str(django_settings.BASE_DIR), "Traceback", "SECRET_KEY", "root:x:0:0"):
        assert leak.encode() not in body
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text


@pytest.mark.parametrize("debug", [False, True], ids=["debug-off", "debug-on"])
def test_static_files_are_still_served(asgi_server, settings, debug):
    settings.DEBUG = debug

    status, body = raw_get(asgi_server, "/static/rojo/chat.js")
    encoded, same = raw_get(asgi_server, "/static/rojo/%63hat.js")

    assert status == 200 and b"import" in body
    assert encoded == 200 and same == body
    assert raw_get(asgi_server, "/static/rojo/missing.js")[0] == 404


@pytest.mark.django_db(transaction=True)
def test_the_development_server_of_make_run_answers_traversals_with_404(tmp_path):
    """`make run` serves with `manage.py runserver` and DEBUG=1: run its command line from the
    Makefile as it is, on the test database, and send it the same attempts."""
    import re
    import subprocess
    import sys

    from tests.support.server_process import ServerProcess, _free_port, _wait_ready, database_url

    makefile = (django_settings.BASE_DIR / "Makefile").read_text()
    line = re.search(r"manage\.py runserver (.*)", makefile).group(1).split()
    port = _free_port()
    arguments = [f"127.0.0.1:{port}" if "$(PORT)" in a else a for a in line]
    log_path = tmp_path / "runserver.log"
    env = {
        **os.environ,
        "DEBUG": "1",
        "DJANGO_SETTINGS_MODULE": "roject.settings",
        "DATABASE_URL": database_url(),
        "ROJO_STORAGE_DIR": str(tmp_path / "storage"),
    }
    with log_path.open("w") as log:
        process = subprocess.Popen(
            [sys.executable, "manage.py", "runserver", "--noreload", *arguments],
            cwd=django_settings.BASE_DIR,
            env=env,
            stdout=log,
            stderr=log,
        )
    server = ServerProcess(f"http://127.0.0.1:{port}", process, log_path)
    try:
        _wait_ready(server)
        answers = {path: raw_get(server.base_url, path)[0] for path in TRAVERSALS}
        served = raw_get(server.base_url, "/static/rojo/chat.js")[0]
    finally:
        server.stop()

    assert answers == dict.fromkeys(TRAVERSALS, 404)
    assert served == 200
    assert "Traceback" not in server.log()
