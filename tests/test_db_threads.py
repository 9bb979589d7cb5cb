"""Each request and turn runs its database calls on a thread of its own, which then ends."""

import asyncio
import threading

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User
from django.db import connections

from roject.db_threads import own_thread


async def _thread() -> int:
    return await sync_to_async(threading.get_ident)()


async def test_a_block_keeps_one_thread_which_ends_after_it():
    async with own_thread():
        thread = await sync_to_async(threading.current_thread)()
        assert await sync_to_async(threading.current_thread)() is thread
        assert thread is not threading.current_thread()
    await asyncio.to_thread(thread.join, 5)
    assert not thread.is_alive()


async def test_blocks_running_at_once_never_share_a_thread():
    started = asyncio.Event()
    release = asyncio.Event()

    async def block() -> int:
        async with own_thread():
            ident = await _thread()
            started.set()
            await release.wait()
            assert await _thread() == ident
            return ident

    first = asyncio.create_task(block())
    await started.wait()
    async with own_thread():
        mine = await _thread()
    release.set()
    assert mine != await first


async def test_a_slow_call_holds_up_only_its_own_block():
    gate = threading.Event()

    async def stuck() -> None:
        async with own_thread():
            await sync_to_async(gate.wait)(5)

    task = asyncio.create_task(stuck())
    await asyncio.sleep(0.05)
    async with own_thread():
        await asyncio.wait_for(_thread(), timeout=1)  # not queued behind the stuck call
    gate.set()
    await task


@pytest.mark.django_db(transaction=True)
async def test_the_threads_database_connection_is_closed_after_the_block():
    def query():
        User.objects.exists()
        return threading.current_thread(), connections["default"]

    async with own_thread():
        thread, used = await sync_to_async(query)()
        assert used.connection is not None
    await asyncio.to_thread(thread.join, 5)
    assert not thread.is_alive()
    assert used.connection is None
