"""The ORM calls of every request and turn on a bounded pool of long-lived threads, each
keeping its database connection.

Each request and each turn used to get a new thread and a new connection, started and
joined for it: under a burst of 200 turn starts that cost more than the queries. Here a
request or turn is a lane (`db_context`): its thread-sensitive calls (the ORM's, through
`sync_to_async`) run one at a time and in order, as on a thread of its own, but each on
whichever pool thread is free. A call that waits (SQLite busy, a row lock, a database out
of reach) holds one pool thread, not the others: the pool's size (ROJO_DB_THREADS) is how
many such calls can wait before the rest queue behind them.

A thread keeps its SQLite connection (CONN_MAX_AGE None). With PostgreSQL's pool option the
connections are the pool's, lent for one call at a time, so that a streaming reply holds
none. A connection whose call failed with a database error is closed after it, and the
next call opens a fresh one.
"""

import atexit
import contextlib
import logging
import queue
import threading
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import Executor, Future

from asgiref.sync import ThreadSensitiveContext
from django.conf import settings
from django.core.handlers.asgi import ASGIHandler
from django.db import connections

from roject.server.direct_writes import DirectStream

logger = logging.getLogger(__name__)

_STOP = None  # a worker that takes it from the queue closes its connections and ends


def _connections_tidy() -> None:
    """After each call: lend pooled connections back (but one inside a transaction), and
    close one whose last call failed, so that the next call does not reuse it broken.

    A pool thread keeps its connection between calls; a pooled one kept so would hold one
    of PostgreSQL's (100 by default) per thread across all processes for nothing.
    """
    for connection in connections.all(initialized_only=True):
        if connection.connection is None or connection.in_atomic_block:
            continue
        if connection.errors_occurred or connection.settings_dict["OPTIONS"].get("pool"):
            connection.close()


class DbThreadPool:
    """A fixed number of threads running the lanes' calls, started at the first call."""

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"a database thread pool needs at least one thread, not {size}")
        self.size = size
        self.threads: list[threading.Thread] = []
        self._jobs: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._closed = False

    def run(self, job: Callable[[], None]) -> None:
        """Queue `job` for the next free thread."""
        if not self.threads or self._closed:
            self._start()
        self._jobs.put(job)

    def _start(self) -> None:
        with self._lock:
            if self._closed:
                raise RuntimeError("the database thread pool is closed")
            if self.threads:
                return
            for number in range(self.size):
                thread = threading.Thread(target=self._work, name=f"db-{number}", daemon=True)
                thread.start()
                self.threads.append(thread)

    def _work(self) -> None:
        while (job := self._jobs.get()) is not _STOP:
            job()
        connections.close_all()

    def close(self, timeout: float = 10) -> None:
        """End the threads once the calls queued before are done, each closing its
        connections; wait `timeout` seconds at most in all (daemon threads: one stuck on
        a database out of reach does not keep the process from exiting)."""
        with self._lock:
            self._closed = True
            threads = list(self.threads)
        for _ in threads:
            self._jobs.put(_STOP)
        deadline = time.monotonic() + timeout
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))


class _Lane(Executor):
    """One request's or turn's calls: one at a time and in order, as asgiref's thread-
    sensitive mode needs, each on whichever of the pool's threads is free."""

    def __init__(self, pool: DbThreadPool) -> None:
        self._pool = pool
        # A list, not a deque: it holds one call at a time, mostly, and every request and
        # turn has a lane for as long as it streams (an empty deque is 624 bytes, a list 56).
        self._calls: list = []
        self._running = False
        self._lock = threading.Lock()

    def submit(self, fn, /, *args, **kwargs) -> Future:
        future: Future = Future()
        with self._lock:
            self._calls.append((future, fn, args, kwargs))
            if self._running:
                return future
            self._running = True
        self._pool.run(self._next)
        return future

    def _next(self) -> None:
        """(On a pool thread) Run the lane's first call, then queue the one after it."""
        with self._lock:
            future, fn, args, kwargs = self._calls.pop(0)
        if future.set_running_or_notify_cancel():
            result, error = None, None
            try:
                result = fn(*args, **kwargs)
            except BaseException as exc:  # the caller's to handle, as in any executor
                error = exc
            # Before the answer: the caller goes on with the connection already given back.
            try:
                _connections_tidy()
            except Exception:  # the call's answer stands; the lane must go on
                logger.exception("closing a database connection after a call failed")
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(result)
            del result, error  # no reference kept past the call (a traceback's frames)
        with self._lock:
            if not self._calls:
                self._running = False
                return
        self._pool.run(self._next)


_pool: DbThreadPool | None = None
_pool_lock = threading.Lock()


def db_pool() -> DbThreadPool:
    """The process's pool, made at its first use with ROJO_DB_THREADS threads and closed
    when the process exits."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = DbThreadPool(settings.ROJO_DB_THREADS)
            atexit.register(_pool.close)
        return _pool


def db_pool_close() -> None:
    """Close the process's pool (its threads end, each closing its connections); the next
    call makes a new one."""
    global _pool
    with _pool_lock:
        pool, _pool = _pool, None
    if pool is not None:
        atexit.unregister(pool.close)
        pool.close()


@contextlib.asynccontextmanager
async def db_context(pool: DbThreadPool | None = None) -> AsyncIterator[None]:
    """Run the block's thread-sensitive calls (the ORM's) in a lane of their own on the
    database threads (the process's pool unless `pool` is given)."""
    async with ThreadSensitiveContext(executor=_Lane(pool or db_pool())):
        yield


def _request_started_without_a_trip() -> None:
    """Take Django's two receivers off request_started: they are sync, so each request's
    start was a trip to a database thread (the signal's asend) to run them, on whichever
    thread was free, not on the ones the request's calls would use. Here they have nothing
    to do: close_old_connections' work is each call's (_connections_tidy: a failed
    connection closed, a pooled one lent back; SQLite's are kept, as CONN_MAX_AGE None
    says), and reset_queries only empties a DEBUG log bounded by Django anyway.
    request_finished keeps them: it runs in the response's close, a trip Django makes in
    any case."""
    from django.core.signals import request_started
    from django.db import close_old_connections, reset_queries

    request_started.disconnect(reset_queries)
    request_started.disconnect(close_old_connections)


class PooledThreadsASGIHandler(ASGIHandler):
    """Django's ASGI handler, each request in a lane of its own on the database threads.

    Django's own ThreadSensitiveContext inside it then finds one entered and changes nothing.
    Its middlewares are Django's, their hooks on the event loop where they do no I/O
    (roject/server/loop_middleware.py), and its request_started signal costs no trip
    (_request_started_without_a_trip).
    """

    def __init__(self) -> None:
        _request_started_without_a_trip()
        super().__init__()

    def load_middleware(self, is_async=False):
        from roject.server.loop_middleware import loop_twins_loaded

        with loop_twins_loaded():
            super().load_middleware(is_async)

    async def __call__(self, scope, receive, send):
        async with db_context():
            await super().__call__(scope, receive, send)

    async def send_response(self, response, send):
        if isinstance(response, DirectStream):  # its parts may be written by their producer
            response.bind(send)
        await super().send_response(response, send)

    @classmethod
    def chunk_bytes(cls, data):
        """Django's, without a generator for a part that fits one message (every streamed
        event): the generator's making and two resumptions came once per chunk of a reply."""
        if 0 < len(data) <= cls.chunk_size:
            return ((data, True),)
        return super().chunk_bytes(data)
