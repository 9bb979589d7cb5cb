"""Lent database threads: each request or turn has one to itself, and threads are reused."""

import asyncio
import threading

from asgiref.sync import sync_to_async

from roject.db_threads import lent_thread


async def _thread() -> int:
    return await sync_to_async(threading.get_ident)()


async def test_a_block_keeps_one_thread_and_the_next_block_gets_it_again():
    async with lent_thread():
        first = await _thread()
        assert await _thread() == first
    threads_before = threading.active_count()
    async with lent_thread():
        assert await _thread() == first
    assert threading.active_count() == threads_before  # no thread started for it


async def test_blocks_running_at_once_never_share_a_thread():
    started = asyncio.Event()
    release = asyncio.Event()

    async def block() -> int:
        async with lent_thread():
            ident = await _thread()
            started.set()
            await release.wait()
            assert await _thread() == ident
            return ident

    first = asyncio.create_task(block())
    await started.wait()
    async with lent_thread():
        mine = await _thread()
    release.set()
    assert mine != await first


async def test_a_slow_call_holds_up_only_its_own_block():
    gate = threading.Event()

    async def stuck() -> None:
        async with lent_thread():
            await sync_to_async(gate.wait)(5)

    task = asyncio.create_task(stuck())
    await asyncio.sleep(0.05)
    async with lent_thread():
        await asyncio.wait_for(_thread(), timeout=1)  # not queued behind the stuck call
    gate.set()
    await task
