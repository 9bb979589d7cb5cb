"""SQLite with the writers of one process taking turns in order, instead of polling the file lock.

SQLite lets one connection write at a time; the others retry on their busy timeout, sleeping
up to 100 ms between tries, and the one that happens to try when the lock is free wins. With
hundreds of turns in one process (each with its own database thread) that lottery left some
writers unlucky past the timeout ("database is locked": a lost message, a 500), and every
loser kept a thread runnable and fighting for the GIL, which slowed the holder down. Here a
writer first waits on a process-wide lock (blocked in the kernel, not polling), so a write
transaction competes only with writers of other processes, which the busy timeout still
handles. Reads never wait on it: in WAL mode they do not block or get blocked.
"""

import threading

from django.db.backends.sqlite3 import base
from django.db.utils import OperationalError

from roject.server.sqlite_backend.bindings import clear_bindings, long_value

_WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE", "CREATE", "DROP", "ALTER")
_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()


def _writer_lock(name: str) -> threading.Lock:
    with _locks_guard:
        return _locks.setdefault(name, threading.Lock())


def _acquire(lock: threading.Lock, timeout: float) -> None:
    """Wait as long as SQLite's own busy timeout would have, and fail the way it does."""
    if not lock.acquire(timeout=timeout):
        raise OperationalError("database is locked")


def _writes(query: str) -> bool:
    return query.lstrip()[:7].upper().startswith(_WRITES)


class _Cursor(base.SQLiteCursorWrapper):
    """A write outside a transaction (autocommit) takes the process's writer lock for itself;
    inside one, the transaction holds it already. A query that bound a long value has the
    connection's statements let go of their bound values (see bindings.py) once it is done:
    at once, or after its rows are fetched (an INSERT … RETURNING still runs until then)."""

    lock: threading.Lock
    timeout: float
    _unbind = False

    def _locked(self, run, query, *args):
        if self.connection.in_transaction or not _writes(query):
            return run(query, *args)
        _acquire(self.lock, self.timeout)
        try:
            return run(query, *args)
        finally:
            self.lock.release()

    def execute(self, query, params=None):
        result = self._locked(super().execute, query, params)
        if long_value(params):
            self._unbind = not clear_bindings(self.connection)
        return result

    def executemany(self, query, param_list):
        return self._locked(super().executemany, query, param_list)

    def _fetched(self, rows):
        if self._unbind:
            self._unbind = not clear_bindings(self.connection)
        return rows

    def fetchone(self):
        return self._fetched(super().fetchone())

    def fetchmany(self, size=None):
        return self._fetched(super().fetchmany(self.arraysize if size is None else size))

    def fetchall(self):
        return self._fetched(super().fetchall())


class DatabaseWrapper(base.DatabaseWrapper):
    """Transactions (BEGIN IMMEDIATE: they all write) hold the writer lock until they end."""

    _holds_writer = False

    @property
    def _writer(self) -> threading.Lock:
        return _writer_lock(str(self.settings_dict["NAME"]))

    @property
    def _timeout(self) -> float:
        return float(self.settings_dict["OPTIONS"].get("timeout", 5))

    def create_cursor(self, name=None):
        lock, timeout = self._writer, self._timeout

        def cursor(connection):
            made = _Cursor(connection)
            made.lock, made.timeout = lock, timeout
            return made

        return self.connection.cursor(factory=cursor)

    def _start_transaction_under_autocommit(self):
        _acquire(self._writer, self._timeout)
        self._holds_writer = True
        try:
            super()._start_transaction_under_autocommit()
        except BaseException:
            self._writer_release()
            raise

    def _writer_release(self) -> None:
        if self._holds_writer:
            self._holds_writer = False
            self._writer.release()

    def _commit(self):
        try:
            return super()._commit()
        finally:
            self._writer_release()

    def _rollback(self):
        try:
            return super()._rollback()
        finally:
            self._writer_release()

    def _close(self):
        try:
            return super()._close()
        finally:
            self._writer_release()
