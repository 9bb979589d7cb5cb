"""Reading one channel of the Channels layer with a time limit, losing nothing to it.

channels_redis delivers the messages of a process's channels through one receive loop into
a buffer per channel; a receive() that is cancelled deletes its channel's buffer, with every
message already in it, and drops one it was being handed at that moment. A follower that
waited with asyncio.wait_for(layer.receive(...)) cancelled a receive every time its wait
ran out: a relayed chunk arriving just then was lost, and the reply went on without it
(issue #31). Here a receive under way is never cancelled by a wait that runs out: the next
wait goes on with it.
"""

import asyncio


class ChannelReader:
    """The messages of one channel, each waited for at most a given time."""

    def __init__(self, layer, channel: str) -> None:
        self.layer = layer
        self.channel = channel
        self._pending: asyncio.Future | None = None

    async def next(self, seconds: float) -> dict | None:
        """The next message; None when none came within `seconds` (the receive goes on).

        What the layer raised (Redis timing out, say) is raised here, once."""
        if self._pending is None:
            self._pending = asyncio.ensure_future(self.layer.receive(self.channel))
        done, _ = await asyncio.wait({self._pending}, timeout=seconds)
        if not done:
            return None
        received, self._pending = self._pending, None
        return received.result()

    def close(self) -> None:
        """Stop receiving: the channel is given up (what is still on its way is not needed)."""
        if self._pending is not None:
            self._pending.cancel()
            self._pending = None
