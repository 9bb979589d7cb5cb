"""News for owners' pages that their Approvals inbox changed: one Channels group per user.

A routed call that starts or stops waiting is published to each owner of its project; every
page an owner has open follows their group through one server-sent event stream
(`GET /api/approvals/live`) and reads the count again from the database. The group lives
in the channel layer (Redis with `REDIS_URL`), so news from the process running the turn
reaches pages served by any other.

While the layer is out of reach the stream says so, with the chat re-attach's ERROR
(code `unavailable`, a `retry` hint in seconds), and ends: the page connects again after a
growing delay (static/rojo/approvals-live.js) and gets the count once the layer is back.
"""

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

from channels.layers import get_channel_layer

from roject.models import Membership, Role
from rojos.outages import LAYER_ERRORS, UNAVAILABLE_CODE

__all__ = ["LAYER_ERRORS", "approvals_changed_publish", "approvals_subscribed", "live_unavailable"]

LIVE_DOWN = "The server cannot reach its message relay to count your approvals. Reconnecting…"

logger = logging.getLogger(__name__)


def live_unavailable() -> dict:
    """The event a live count's page gets while the layer is down: as the chat's, with
    `retry` in seconds (rojos.turns.relay.relay_unavailable)."""
    return {"kind": "ERROR", "data": {"message": LIVE_DOWN, "code": UNAVAILABLE_CODE, "retry": 2}}


def _group(user_id: int) -> str:
    return f"approvals-live.{int(user_id)}"


async def approvals_changed_publish(*, project_id: int) -> None:
    """Tell every owner of the project that their inbox changed; never fails the caller
    (a layer that is down loses the news: the count is right again at the next check)."""
    owners = Membership.objects.filter(project_id=project_id, role=Role.OWNER)
    layer = get_channel_layer()
    async for user_id in owners.values_list("user_id", flat=True):
        try:
            await layer.group_send(_group(user_id), {"type": "approvals.changed"})
        except Exception:  # the layer's own errors vary by backend; logged, not raised
            logger.warning("could not tell user %s of approvals", user_id, exc_info=True)


@contextlib.asynccontextmanager
async def approvals_subscribed(*, user_id: int, every: float) -> AsyncIterator[AsyncIterator[bool]]:
    """Join the user's group; the block gets True for each piece of news, False after
    `every` seconds without one (the caller checks again who listens, and the count:
    calls also leave the inbox by expiring, which sends no news)."""
    layer = get_channel_layer()
    channel = await layer.new_channel()
    group = _group(user_id)
    await layer.group_add(group, channel)
    try:
        yield _received(layer, group, channel, every)
    finally:
        with contextlib.suppress(Exception):  # a layer that is down forgets the group anyway
            await layer.group_discard(group, channel)


async def _received(layer, group: str, channel: str, every: float):
    while True:
        try:
            await asyncio.wait_for(layer.receive(channel), every)
        except TimeoutError:
            yield False
            await layer.group_add(group, channel)  # keeps the membership from expiring
            continue
        yield True
