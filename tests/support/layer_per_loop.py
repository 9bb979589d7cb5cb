"""One Redis channel layer object per event loop in the test process, as in production.

A server process runs one event loop, so it has one layer object. The test process runs
several at once: the live server's loop in its thread, and each async test's own. Redis'
layer lets one loop at a time receive on a layer object ("Two event loops are trying to
receive() on one channel layer at once!"), so a turn's listener in one loop failed while a
test's turn in another was receiving, and Stop or a re-attach to the first went unanswered.
Layer objects of one Redis speak to each other through it, as two processes do. A layer a
test sets in `channel_layers.backends` itself is used as it is, in every loop.
"""

import asyncio
import weakref

from channels.layers import ChannelLayerManager
from channels_redis.core import RedisChannelLayer

_getitem = ChannelLayerManager.__getitem__
_lazily_made: dict[str, object] = {}
_per_loop: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict]" = (
    weakref.WeakKeyDictionary()
)


def _layer_of_this_loop(self: ChannelLayerManager, key: str):
    made_now = key not in self.backends
    layer = _getitem(self, key)
    if made_now:
        _lazily_made[key] = layer
    if not isinstance(layer, RedisChannelLayer) or _lazily_made.get(key) is not layer:
        return layer  # the in-memory layer (one process-wide object), or a test's own
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return layer
    layers = _per_loop.setdefault(loop, {})
    base, own = layers.get(key, (None, None))
    if base is not layer:  # none yet, or the settings changed since (a new lazily made one)
        own = self.make_backend(key)
        layers[key] = (layer, own)
    return own


def layer_per_loop_install() -> None:
    ChannelLayerManager.__getitem__ = _layer_of_this_loop
