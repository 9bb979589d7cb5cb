"""The production server (`manage.py serve`) sleeps while it has nothing to do, and still
stops at once when told: its main loop wakes once a second, not ten times
(roject/server/exit_wake.py)."""

import threading
import time
from email.utils import parsedate_to_datetime
from pathlib import Path

import httpx2
import pytest
import uvicorn

from roject.server import exit_wake
from tests.support.live_server import wait_until

WATCHED_SECONDS = 3.0


def _main_thread_wakes(pid: int) -> int:
    """The times the process's main thread (the event loop's) went to sleep and woke."""
    status = Path(f"/proc/{pid}/task/{pid}/status").read_text()
    return int(status.split("voluntary_ctxt_switches:")[1].split()[0])


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="Linux's /proc")
def test_an_idle_server_wakes_about_once_a_second(server_process):
    server = server_process("serve")
    date = httpx2.get(server.base_url + "/healthz", timeout=10).headers["date"]
    assert parsedate_to_datetime(date).timestamp() == pytest.approx(time.time(), abs=5)
    before = _main_thread_wakes(server.process.pid)
    time.sleep(WATCHED_SECONDS)
    woken = _main_thread_wakes(server.process.pid) - before
    # uvicorn's own loop: 30 in 3 s (a tick every 0.1 s); here 3, and a margin.
    assert woken <= 2 * WATCHED_SECONDS, woken


def test_an_exit_set_from_another_thread_wakes_the_loop_before_its_tick(monkeypatch):
    """As a signal's handler, the drain or a test's thread sets it: the loop wakes for it
    rather than at its next tick (made a minute away here)."""
    monkeypatch.setattr(exit_wake, "TICK_SECONDS", 60.0)

    async def app(scope, receive, send):
        raise AssertionError("no request is sent")

    config = uvicorn.Config(app, host="127.0.0.1", port=0, lifespan="off", log_level="warning")
    server = exit_wake.ExitWokenServer(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_until(lambda: server.started)
    server.should_exit = True
    thread.join(timeout=30)
    assert not thread.is_alive()
