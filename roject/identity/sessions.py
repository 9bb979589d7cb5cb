"""Sessions read from the cache and kept in the database, where a cache that cannot be
reached is a miss, not an error.

Django's cached_db store lets a failing cache write (Redis down) raise, so every request
would fail while Redis is down although the database holds every session. Here each cache
call that fails is logged and counts as a miss: the session comes from the database, and
requests go on as they did before sessions were cached.

Except when a session ends (a logout, a login as someone else): the database's row would go
but a cached copy left behind would log the session in again once the cache is back (or at
once, for a process the cache was only cut off from). So ending a session deletes its
cached copy first, and a cache out of reach refuses it (SessionNotEnded), nothing changed.
A restore ends them all alike (`sessions_cached_end`), before it deletes their rows.
"""

import logging

from django.conf import settings
from django.contrib.sessions.backends import cached_db
from django.contrib.sessions.models import Session
from django.core.cache import caches
from django.db import DEFAULT_DB_ALIAS

logger = logging.getLogger("roject.sessions")


class _ForgivingCache:
    """A cache whose failures are misses (get → None, set and delete → nothing done)."""

    def __init__(self, cache):
        self._cache = cache

    def _call(self, name, *args, default=None):
        try:
            return getattr(self._cache, name)(*args)
        except Exception as exc:  # any backend's error: the database is the source of truth
            logger.warning("session cache unavailable (%s): %s", name, exc)
            return default

    async def _acall(self, name, *args, default=None):
        try:
            return await getattr(self._cache, name)(*args)
        except Exception as exc:
            logger.warning("session cache unavailable (%s): %s", name, exc)
            return default

    def get(self, *args):
        return self._call("get", *args)

    def set(self, *args):
        return self._call("set", *args)

    def delete(self, *args):
        return self._call("delete", *args, default=False)

    def __contains__(self, key) -> bool:
        return bool(self._call("has_key", key, default=False))

    async def aget(self, *args):
        return await self._acall("aget", *args)

    async def aset(self, *args):
        return await self._acall("aset", *args)

    async def adelete(self, *args):
        return await self._acall("adelete", *args, default=False)

    async def ahas_key(self, *args):
        return bool(await self._acall("ahas_key", *args, default=False))


class SessionNotEnded(Exception):
    """The session's cached copy could not be deleted (the cache is out of reach): the
    session goes on, and whoever asked to end it must be told."""


class SessionStore(cached_db.SessionStore):
    """cached_db with a cache whose failures are misses (see the module's docstring)."""

    def __init__(self, session_key=None):
        super().__init__(session_key)
        self._strict_cache = self._cache
        self._cache = _ForgivingCache(self._cache)

    def cached_copy_delete(self) -> None:
        """Delete the session's cached copy; SessionNotEnded when the cache is out of reach."""
        if self.session_key is None:
            return
        try:
            self._strict_cache.delete(self.cache_key_prefix + self.session_key)
        except Exception as exc:  # any backend's error, as above
            raise SessionNotEnded(f"the session cache cannot be reached: {exc}") from exc

    async def acached_copy_delete(self) -> None:
        """Async twin of cached_copy_delete."""
        if self.session_key is None:
            return
        try:
            await self._strict_cache.adelete(self.cache_key_prefix + self.session_key)
        except Exception as exc:
            raise SessionNotEnded(f"the session cache cannot be reached: {exc}") from exc

    def peek(self) -> dict:
        """The session's data as load() reads it, but a miss is not written back to the
        cache: a check racing a logout (which deletes the cached copy, then the row) would
        otherwise put back a copy of the session it ended."""
        if self.session_key is None:
            return {}
        data = self._cache.get(self.cache_key_prefix + self.session_key)
        if data is None:
            row = self._get_session_from_db()
            data = self.decode(row.session_data) if row else {}
        return data

    def flush(self) -> None:
        self.cached_copy_delete()
        super().flush()

    async def aflush(self) -> None:
        await self.acached_copy_delete()
        await super().aflush()


_END_BATCH = 500


def sessions_cached_end(*, using: str = DEFAULT_DB_ALIAS) -> int:
    """(Blocking) Delete the cached copy of every session the database holds, for a restore
    that then deletes their rows: a copy left in the cache (Redis outlives the restore)
    would keep its person logged in. How many; SessionNotEnded when the cache is out of
    reach."""
    keys = list(Session.objects.using(using).values_list("session_key", flat=True))
    cache = caches[settings.SESSION_CACHE_ALIAS]
    for start in range(0, len(keys), _END_BATCH):
        batch = keys[start : start + _END_BATCH]
        try:
            cache.delete_many([SessionStore.cache_key_prefix + key for key in batch])
        except Exception as exc:  # any backend's error, as in cached_copy_delete
            raise SessionNotEnded(f"the session cache cannot be reached: {exc}") from exc
    return len(keys)
