"""Freed memory goes back to the system while turns run: a trim every interval while a turn
runs, one more after the last ends, none while the process is idle."""

import time

import pytest

from rojos.turns import memory_trim
from tests.support.live_server import wait_until


@pytest.fixture
def trims(monkeypatch, settings):
    """The trimmer's calls of glibc's malloc_trim (still called behind the count), each as
    the count of running turns when it was made (-1: none runs, the final trim is due)."""
    settings.ROJO_MALLOC_TRIM_SECONDS = 0.05
    calls = []
    glibc = memory_trim._malloc_trim()

    def counted(pad: int) -> int:
        calls.append(memory_trim._running)
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
    wait_until(idle, timeout=60)
    after = len(trims)
    time.sleep(0.3)  # six intervals

    assert len(trims) == after  # idle: no more
    ended = trims.index(-1)
    assert all(running == 1 for running in trims[:ended])  # while the turn ran
    # after its end: the final trim, and maybe one that was under way as it ended
    assert trims[ended:] in ([-1], [-1, -1])


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
