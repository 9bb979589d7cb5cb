"""Freed memory goes back to the system while turns run: a trim every interval while a turn
runs, one more after the last ends, none while the process is idle."""

import time

import pytest

from rojos.turns import memory_trim
from tests.support.live_server import wait_until


@pytest.fixture
def trims(monkeypatch, settings):
    """The times the trimmer called glibc's malloc_trim (still called behind the count)."""
    settings.ROJO_MALLOC_TRIM_SECONDS = 0.05
    calls = []
    glibc = memory_trim._malloc_trim()

    def counted(pad: int) -> int:
        calls.append(time.monotonic())
        return glibc(pad)

    monkeypatch.setattr(memory_trim, "_malloc_trim", lambda: counted)
    return calls


def test_glibc_malloc_trim_is_found():
    trim = memory_trim._malloc_trim()
    assert trim is not None  # this machine runs glibc
    assert trim(0) in (0, 1)


def idle() -> bool:
    """The trimmer waits for a turn: the trim after the last one's end is done."""
    return memory_trim._running == 0


def test_trims_while_a_turn_runs_once_after_and_none_while_idle(trims):
    with memory_trim.memory_trimmed():
        wait_until(lambda: len(trims) >= 4, timeout=60)  # one every 0.05 s, over and over
    during = len(trims)
    wait_until(idle, timeout=60)
    after = len(trims)
    time.sleep(0.3)  # six intervals

    assert 1 <= after - during <= 2  # the one after the end (and one already under way)
    assert len(trims) == after  # idle: no more


def test_overlapping_turns_keep_it_trimming_until_the_last_ends(trims):
    first, second = memory_trim.memory_trimmed(), memory_trim.memory_trimmed()
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)
    before = len(trims)
    wait_until(lambda: len(trims) >= before + 3, timeout=60)  # the second turn still runs
    assert not idle()
    second.__exit__(None, None, None)
    wait_until(idle, timeout=60)
    ended = len(trims)
    time.sleep(0.3)
    assert len(trims) == ended


def test_zero_seconds_turns_it_off(trims, settings):
    settings.ROJO_MALLOC_TRIM_SECONDS = 0
    with memory_trim.memory_trimmed():
        time.sleep(0.3)
    time.sleep(0.2)
    assert trims == []
