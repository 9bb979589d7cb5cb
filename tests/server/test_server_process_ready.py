"""The test support's server processes are ready only when the answer is their own.

Two xdist workers can be handed one free port; the later server then dies with "address
already in use" while the earlier one, on another worker's database, answers its requests.
"""

import http.server
import os
import subprocess
import sys
import threading

import httpx2

from tests.support import server_process
from tests.support.server_process import listens, server_start


class _Impostor(http.server.BaseHTTPRequestHandler):
    """Another worker's server: it answers 401 to the readiness probe, as ours would."""

    def do_GET(self):
        self.send_response(401)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def test_listens_tells_whose_socket_is_listening():
    impostor = http.server.HTTPServer(("127.0.0.1", 0), _Impostor)
    port = impostor.server_address[1]
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert listens(pid=os.getpid(), port=port)
        assert not listens(pid=sleeper.pid, port=port)
    finally:
        sleeper.kill()
        sleeper.wait()
        impostor.server_close()


def test_a_port_another_server_holds_is_not_taken_for_ours(
    transactional_db, storage_dir, tmp_path, monkeypatch
):
    impostor = http.server.HTTPServer(("127.0.0.1", 0), _Impostor)
    threading.Thread(target=impostor.serve_forever, daemon=True).start()
    taken = impostor.server_address[1]
    ports = iter([taken])
    free_port = server_process._free_port
    monkeypatch.setattr(server_process, "_free_port", lambda: next(ports, None) or free_port())
    try:
        started = server_start(storage_dir=storage_dir, log_path=tmp_path / "server.log")
        try:
            assert started.base_url != f"http://127.0.0.1:{taken}"
            assert httpx2.get(started.base_url + "/healthz", timeout=5).status_code == 200
        finally:
            started.stop()
    finally:
        impostor.shutdown()
        impostor.server_close()
