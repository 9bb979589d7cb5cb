"""rojos.whole: a step awaited to its end though its awaiter is cancelled, once or twice."""

import asyncio

import pytest

from rojos.whole import whole


async def _step(gate: asyncio.Event, ended: list) -> str:
    await gate.wait()
    ended.append("ended")
    return "done"


async def test_a_step_ends_whole_and_its_awaiter_then_ends_cancelled():
    gate, ended = asyncio.Event(), []
    awaiter = asyncio.ensure_future(whole(_step(gate, ended)))
    await asyncio.sleep(0)
    awaiter.cancel()
    await asyncio.sleep(0)
    assert not awaiter.done()  # it waits for the step
    gate.set()
    with pytest.raises(asyncio.CancelledError):
        await awaiter
    assert ended == ["ended"]


async def test_a_second_cancel_does_not_reach_the_step():
    gate, ended = asyncio.Event(), []
    awaiter = asyncio.ensure_future(whole(_step(gate, ended)))
    await asyncio.sleep(0)
    awaiter.cancel()
    await asyncio.sleep(0)
    awaiter.cancel()
    await asyncio.sleep(0)
    gate.set()
    with pytest.raises(asyncio.CancelledError):
        await awaiter
    for _ in range(3):
        await asyncio.sleep(0)
    assert ended == ["ended"]


async def test_a_step_that_fails_after_the_cancel_raises_its_error():
    gate = asyncio.Event()

    async def failing():
        await gate.wait()
        raise ValueError("the database said no")

    awaiter = asyncio.ensure_future(whole(failing()))
    await asyncio.sleep(0)
    awaiter.cancel()
    await asyncio.sleep(0)
    gate.set()
    with pytest.raises(ValueError, match="said no"):
        await awaiter


async def test_uncancelled_it_returns_the_steps_result():
    gate = asyncio.Event()
    gate.set()
    assert await whole(_step(gate, [])) == "done"
