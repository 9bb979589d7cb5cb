"""REDIS_URL as the channel layers and the cache: Redis, shared by the server processes, or
one process's memory without it."""

import os

from django.core.exceptions import ImproperlyConfigured

from .environment import env_float, env_int


def redis_url() -> str:
    """REDIS_URL, checked to be one ("" when unset)."""
    url = os.environ.get("REDIS_URL", "").strip()
    if url and url.split("://", 1)[0].lower() not in {"redis", "rediss", "unix"}:
        # redis-py's own ValueError came as a traceback from the doctor and the first request
        # that used the cache; the URL itself is not repeated: it may hold a password.
        raise ImproperlyConfigured(
            "REDIS_URL is not a Redis URL: it must start with redis://, rediss:// (TLS) or "
            "unix://. Set it to redis://host:6379/0, or unset it for one process's in-memory "
            "channel layer and cache."
        )
    return url


def channel_layers(url: str) -> dict:
    """CHANNEL_LAYERS: on Redis with `url`, else in the process's memory."""
    if not url:
        return {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    default = {
        "BACKEND": "roject.server.channel_layer.BlockingPoolRedisChannelLayer",
        # redis-py 8 reads with a 5 s socket timeout by default, as long as the layer's
        # blocking pop waits (5 s) for a message: an idle receive then failed (a page's live
        # stream broke). A longer read timeout still notices a Redis gone silent
        # (ROJO_REDIS_SOCKET_TIMEOUT; the relay retries a read that timed out anyway). At
        # most ROJO_REDIS_POOL_SIZE connections per process; a command past them waits up to
        # 10 s for one (a burst of 1,000 turn starts joins 1,000 groups).
        "CONFIG": {
            "hosts": [
                {
                    "address": url,
                    "socket_timeout": env_float("ROJO_REDIS_SOCKET_TIMEOUT", 15, positive=True),
                    "max_connections": env_int("ROJO_REDIS_POOL_SIZE", 50, positive=True),
                    "timeout": 10,
                }
            ]
        },
    }
    # A turn's Stop, approvals and follow requests, apart from the relayed chunks: a layer
    # object of its own has a queue of its own in Redis (rojos/turns/control_layer.py).
    control = {**default, "CONFIG": {**default["CONFIG"], "prefix": "asgi-control"}}
    return {"default": default, "control": control}


def caches(url: str) -> dict:
    """CACHES. The cache holds the counts of failed logins (roject/identity/login_limits.py),
    which must hold across server processes: in Redis with `url`, in the process's memory
    without it (one process; several need REDIS_URL anyway, for the channel layer)."""
    if not url:
        return {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    return {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": url,
            "KEY_PREFIX": "rojo",
        }
    }
