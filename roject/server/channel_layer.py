"""The Channels layer on Redis, whose connection pool waits for a free connection.

redis-py's asyncio pool (channels_redis's default) holds at most 100 connections and fails
the command that would need a 101st with MaxConnectionsError: a burst of a few hundred turn
starts, each joining its group on the layer at once, then had most of them answered 503
("cannot reach its message relay"). A blocking pool bounds the connections the same way but
queues the commands past the bound, each for at most the pool's `timeout`; a Redis that is
really out of reach still fails them (the pool's ConnectionError is a RedisError).
"""

from channels_redis.core import RedisChannelLayer
from redis.asyncio import BlockingConnectionPool


class BlockingPoolRedisChannelLayer(RedisChannelLayer):
    """RedisChannelLayer whose host entries (`address` plus connection and pool options,
    `max_connections` and `timeout` among them) make a BlockingConnectionPool."""

    def create_pool(self, index: int) -> BlockingConnectionPool:
        host = dict(self.hosts[index])
        return BlockingConnectionPool.from_url(host.pop("address"), **host)
