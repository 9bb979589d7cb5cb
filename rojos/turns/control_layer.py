"""The channel layer that carries a running turn's control messages: Stop, approvals, follow
requests and their acknowledgements.

channels_redis keeps the messages of all of a process's channels in one Redis key, popped one
at a time by one receive loop. On the default layer a Stop or an approval for a turn waited
there behind every relayed chunk bound for that process's followers, and its acknowledgement
behind those bound for the sender's: under load it was not confirmed within
ROJO_RELAY_CONFIRM_SECONDS on a healthy Redis (issue #31). A layer object of its own (the
`control` alias: its own key, its own receive loop, its own connections) keeps them apart
from that traffic. Relayed events still go over the default layer.
"""

from channels.layers import get_channel_layer
from channels_redis.core import RedisChannelLayer
from django.conf import settings

CONTROL = "control"


def control_layer():
    """The layer for turn control messages: the `control` alias on Redis; the default one
    otherwise (a layer in one process's memory has no shared queue to keep them out of)."""
    default = get_channel_layer()
    if CONTROL not in settings.CHANNEL_LAYERS or not isinstance(default, RedisChannelLayer):
        return default
    return get_channel_layer(CONTROL)
