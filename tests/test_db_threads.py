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

    pooled = bool(connections["default"].settings_dict["OPTIONS"].get("pool"))
    async with own_thread():
        thread, used = await sync_to_async(query)()
        # Kept between calls; a pooled one is given back after each.
        assert (used.connection is None) == pooled
    await asyncio.to_thread(thread.join, 5)
    assert not thread.is_alive()
    assert used.connection is None


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(
    connections["default"].vendor != "postgresql", reason="PostgreSQL's connection pool"
)
def test_streaming_replies_hold_no_pooled_connection(
    client_for, users, project, fake_provider, settings
):
    """Eight replies streaming at once hold none of the pool's connections (ten at most):
    each request and turn borrows one per trip to the database and gives it back."""
    from tests.fake_provider import stream, text_chunks
    from tests.helpers import make_rojo
    from tests.live_server import parse_sse

    settings.ROJO_USER_CONCURRENT_TURNS = 0
    settings.ROJO_USER_MESSAGES_PER_MINUTE = 0
    replies = 8
    for _ in range(replies):
        fake_provider.add(stream(*text_chunks("w " * 40, pieces=40), delay=0.05))
    rojo = make_rojo(fake_provider.base_url)
    clients = [client_for(users["editor"]) for _ in range(replies)]
    streaming = threading.Barrier(replies + 1, timeout=30)
    outcomes: list[list[str]] = []

    def chat(client) -> None:
        with client.chat_stream(project.pk, rojo=rojo.pk, message="Talk") as response:
            kinds = []
            for event in parse_sse(response.iter_lines()):
                kinds.append(event.type)
                if kinds.count("CHAT") == 2:
                    streaming.wait()
            outcomes.append(kinds)

    threads = [threading.Thread(target=chat, args=(client,)) for client in clients]
    for thread in threads:
        thread.start()
    streaming.wait()
    stats = connections["default"].pool.get_stats()
    lent = stats["pool_size"] - stats.get("pool_available", 0)
    for thread in threads:
        thread.join(30)

    assert lent <= 2  # this test's own connection, and maybe a heartbeat's
    assert len(outcomes) == replies
    assert all(kinds[-1] == "DONE" and "ERROR" not in kinds for kinds in outcomes)
