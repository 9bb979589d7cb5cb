"""Freed memory goes back to the system after turns start and end: a trim an interval after
a turn's start and one after its end, starts close together folded into one trim and one
more after it, none while a turn streams on alone or the process is idle."""

import time

import pytest

from rojos.turns import memory_trim
from tests.support.live_server import wait_until

INTERVAL = 0.2


@pytest.fixture
def trims(monkeypatch, settings):
    """When the trimmer called glibc's malloc_trim (still called behind the count)."""
    wait_until(settled, timeout=60)  # what turns of earlier tests asked for is done
    settings.ROJO_MALLOC_TRIM_SECONDS = INTERVAL
    calls = []
    glibc = memory_trim._malloc_trim()

    def counted(pad: int) -> int:
        calls.append(time.monotonic())
        return glibc(pad)

    monkeypatch.setattr(memory_trim, "_malloc_trim", lambda: counted)
    yield calls
    wait_until(settled, timeout=60)  # none left due for the next test's count


def settled() -> bool:
    """No trim is due: what was asked for is done."""
    return memory_trim._due is None


def test_glibc_malloc_trim_is_found():
    trim = memory_trim._malloc_trim()
    assert trim is not None  # this machine runs glibc
    assert trim(0) in (0, 1)


def test_a_turn_is_trimmed_after_its_start_and_its_end_not_while_it_streams(trims):
    started = time.monotonic()
    with memory_trim.memory_trimmed():
        wait_until(lambda: len(trims) == 1, timeout=60)
        time.sleep(5 * INTERVAL)  # the turn streams on
        assert len(trims) == 1
        ended = time.monotonic()
    wait_until(lambda: len(trims) == 2, timeout=60)
    time.sleep(3 * INTERVAL)

    assert len(trims) == 2
    # Each an interval after what asked for it, when what it freed is freed.
    assert trims[0] - started >= INTERVAL
    assert trims[1] - ended >= INTERVAL


def test_starts_together_fold_into_one_trim_and_one_after_it(trims):
    turns = [memory_trim.memory_trimmed() for _ in range(3)]
    for turn in turns:
        turn.__enter__()
    wait_until(lambda: len(trims) == 2, timeout=60)
    time.sleep(3 * INTERVAL)  # three turns stream on
    assert len(trims) == 2
    assert trims[1] - trims[0] >= INTERVAL
    for turn in turns:
        turn.__exit__(None, None, None)
    wait_until(lambda: len(trims) == 4, timeout=60)  # the ends, folded the same way
    time.sleep(3 * INTERVAL)
    assert len(trims) == 4


def test_zero_seconds_turns_it_off(trims, settings):
    settings.ROJO_MALLOC_TRIM_SECONDS = 0
    with memory_trim.memory_trimmed():
        time.sleep(0.3)
    time.sleep(0.2)
    assert trims == []
