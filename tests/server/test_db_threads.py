"""Each request and turn runs its database calls in a lane of its own on a bounded pool of
long-lived threads, each keeping its connection."""

import asyncio
import threading

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User
from django.core.handlers.asgi import ASGIHandler
from django.db import DatabaseError, connections

from roject.server.db_threads import DbThreadPool, PooledThreadsASGIHandler, db_context


async def _thread() -> threading.Thread:
    return await sync_to_async(threading.current_thread)()


@pytest.fixture
def pool():
    made = DbThreadPool(2)
    yield made
    made.close()


async def test_a_blocks_calls_run_in_order_on_the_pools_threads_never_the_loops(pool):
    order = []
    async with db_context(pool):
        for n in range(5):
            await sync_to_async(order.append)(n)
        threads = {await _thread() for _ in range(10)}
    assert order == [0, 1, 2, 3, 4]
    assert threads <= set(pool.threads)
    assert threading.current_thread() not in threads


async def test_the_pool_is_bounded_and_its_threads_outlive_the_blocks(pool):
    async def block() -> threading.Thread:
        async with db_context(pool):
            return await _thread()

    used = set(await asyncio.gather(*(block() for _ in range(20))))
    assert len(pool.threads) == 2
    assert used <= set(pool.threads)
    assert all(thread.is_alive() for thread in pool.threads)


async def test_a_blocks_calls_made_at_once_still_run_one_at_a_time(pool):
    """asgiref's thread-sensitive mode: one call of a context at a time, as on one thread."""
    running, most = 0, 0

    def call() -> None:
        nonlocal running, most
        running += 1
        most = max(most, running)
        threading.Event().wait(0.02)
        running -= 1

    async with db_context(pool):
        await asyncio.gather(*(sync_to_async(call)() for _ in range(4)))
    assert most == 1


async def test_a_stuck_call_holds_up_no_other_block_until_the_pool_is_used_up(pool):
    gates = [threading.Event(), threading.Event()]

    async def stuck(gate: threading.Event) -> None:
        async with db_context(pool):
            await sync_to_async(gate.wait)(10)

    first = asyncio.create_task(stuck(gates[0]))
    await asyncio.sleep(0.05)
    async with db_context(pool):
        await asyncio.wait_for(_thread(), timeout=2)  # a thread was still free
    second = asyncio.create_task(stuck(gates[1]))
    await asyncio.sleep(0.05)
    async with db_context(pool):
        waiting = asyncio.ensure_future(_thread())
        done, _ = await asyncio.wait([waiting], timeout=0.3)
        assert not done  # both threads are held: the call queues behind them
        gates[0].set()
        await asyncio.wait_for(waiting, timeout=2)
    gates[1].set()
    await asyncio.gather(first, second)


async def test_closing_the_pool_ends_its_threads_once_queued_calls_are_done():
    pool = DbThreadPool(2)
    async with db_context(pool):
        await _thread()
    threads = list(pool.threads)
    await asyncio.to_thread(pool.close)
    assert not any(thread.is_alive() for thread in threads)
    with pytest.raises(RuntimeError, match="closed"):
        pool.run(int)


def _pooled() -> bool:
    return bool(connections["default"].settings_dict["OPTIONS"].get("pool"))


@pytest.mark.django_db(transaction=True)
async def test_a_threads_connection_is_kept_across_blocks_and_closed_with_the_pool():
    """SQLite's: kept by the thread. A pooled one (PostgreSQL) is lent back after each call."""
    pool = DbThreadPool(1)

    def query():
        User.objects.exists()
        wrapper = connections["default"]
        return wrapper, wrapper.connection

    async with db_context(pool):
        first, raw = await sync_to_async(query)()
    async with db_context(pool):
        again, raw_again = await sync_to_async(query)()
    assert again is first
    if _pooled():
        assert first.connection is None
    else:
        assert raw_again is raw and first.connection is raw
    await asyncio.to_thread(pool.close)
    assert first.connection is None


@pytest.fixture
def scratch_database(tmp_path):
    """A second SQLite database in a file (the tests' own is in memory, which Django never
    closes), to see a broken connection replaced."""
    settings_dict = dict(connections["default"].settings_dict)
    settings_dict.update(
        ENGINE="roject.server.sqlite_backend",
        NAME=str(tmp_path / "scratch.sqlite3"),
        OPTIONS={"timeout": 5},
        CONN_MAX_AGE=None,
    )
    connections.settings["scratch"] = settings_dict
    yield "scratch"
    del connections.settings["scratch"]


def test_a_connection_broken_in_a_call_is_replaced_for_the_next(
    scratch_database, django_db_blocker
):
    pool = DbThreadPool(1)

    def raw_connection():
        with connections[scratch_database].cursor() as cursor:
            cursor.execute("SELECT 1")
        return connections[scratch_database].connection

    def break_and_query() -> None:
        connections[scratch_database].connection.close()  # as a dropped link leaves it
        raw_connection()

    async def calls():
        async with db_context(pool):
            raw = await sync_to_async(raw_connection)()
            assert await sync_to_async(raw_connection)() is raw  # kept
            with pytest.raises(DatabaseError):
                await sync_to_async(break_and_query)()
            assert await sync_to_async(raw_connection)() is not raw
            await sync_to_async(lambda: connections[scratch_database].close())()

    with django_db_blocker.unblock():  # the scratch database is no test database's
        try:
            asyncio.run(calls())
        finally:
            pool.close()


def test_writers_contending_through_a_pool_of_two_all_finish(scratch_database, django_db_blocker):
    """SQLite's default pool is small (ROJO_DB_THREADS 3): a lane's transaction begins and
    ends within one call, so the writer holding SQLite's lock always has its thread, and
    writers waiting on the lock while holding every other thread cannot keep it from
    finishing. Forty lanes of five write transactions each, with reads between, through
    two threads: every row is written, no call times out on the lock."""
    from django.db import transaction

    pool = DbThreadPool(2)
    lanes, writes = 40, 5

    def write(lane: int, n: int) -> None:
        with (
            transaction.atomic(using=scratch_database),
            connections[scratch_database].cursor() as cursor,
        ):
            cursor.execute("INSERT INTO rows (lane, n) VALUES (%s, %s)", [lane, n])
            threading.Event().wait(0.002)  # the lock held a while: others queue on it

    def count() -> int:
        with connections[scratch_database].cursor() as cursor:
            cursor.execute("SELECT COUNT(*) FROM rows")
            return cursor.fetchone()[0]

    async def lane(number: int) -> None:
        async with db_context(pool):
            for n in range(writes):
                await sync_to_async(write)(number, n)
                await sync_to_async(count)()

    def setup() -> None:
        with connections[scratch_database].cursor() as cursor:
            cursor.execute("CREATE TABLE rows (lane INTEGER, n INTEGER)")

    async def calls() -> int:
        async with db_context(pool):
            await sync_to_async(setup)()
        await asyncio.wait_for(asyncio.gather(*(lane(n) for n in range(lanes))), timeout=60)
        async with db_context(pool):
            return await sync_to_async(count)()

    with django_db_blocker.unblock():
        try:
            assert asyncio.run(calls()) == lanes * writes
        finally:
            pool.close()


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(
    connections["default"].vendor != "postgresql", reason="PostgreSQL's connection pool"
)
def test_streaming_replies_hold_no_pooled_connection(
    client_for, users, project, fake_provider, settings
):
    """Eight replies streaming at once hold none of the pool's connections (ten at most):
    each request and turn borrows one per trip to the database and gives it back."""
    from tests.support.fake_provider import stream, text_chunks
    from tests.support.helpers import make_rojo
    from tests.support.live_server import parse_sse

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


@pytest.mark.parametrize("size", [0, 1, 65536, 65537, 3 * 65536 + 5])
def test_a_response_part_is_cut_into_messages_as_django_cuts_it(size):
    """One message for a part that fits (every streamed event), without Django's generator."""
    data = b"x" * size
    assert ASGIHandler.chunk_size == 65536
    ours = list(PooledThreadsASGIHandler.chunk_bytes(data))
    assert ours == list(ASGIHandler.chunk_bytes(data))
