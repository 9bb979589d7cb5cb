"""Live news of a project for every page that has it open: one Channels group per project.

Whatever changes in a project (a file, later a conversation's state) is published to the
project's group; each open page follows it through one server-sent event stream
(`GET /api/projects/<id>/live`). The group lives in the channel layer: Redis with
`REDIS_URL`, so an event published by one server process reaches pages served by another;
in one process's memory without it. Events are news, not state: a page that missed some
(it was offline) reloads what it shows.
"""

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator

from channels.layers import get_channel_layer

logger = logging.getLogger(__name__)

KEEPALIVE_SECONDS = 15.0


def _group(project_id: int) -> str:
    return f"project-live.{int(project_id)}"


async def project_event_publish(*, project_id: int, kind: str, data: dict) -> None:
    """Tell every page of the project that `kind` happened; never fails the caller.

    What happened is done by then: a channel layer that is down loses the news (pages
    catch up when they reload), not the change.
    """
    message = {"type": "project.event", "kind": kind, "data": data}
    try:
        await get_channel_layer().group_send(_group(project_id), message)
    except Exception:  # the layer's own errors (Redis down) vary by backend; logged, not raised
        logger.warning("could not publish %r to project %s", kind, project_id, exc_info=True)


@contextlib.asynccontextmanager
async def project_subscribed(
    *, project_id: int, keepalive: float = KEEPALIVE_SECONDS
) -> AsyncIterator[AsyncIterator[dict | None]]:
    """Join the project's group; the block gets its events as they come ({"kind", "data"}),
    and None after `keepalive` seconds without one, so the caller can send a keep-alive and
    check who is still listening. Events published once the block runs reach it."""
    layer = get_channel_layer()
    # The layer's default prefix, as every other channel of the process: channels_redis pops
    # one prefix's messages at a time (one receive lock per layer), so a channel of its own
    # prefix held a turn's Stop, approvals and relay requests for up to its 5 s blocking pop.
    channel = await layer.new_channel()
    group = _group(project_id)
    await layer.group_add(group, channel)
    try:
        yield _received(layer, group, channel, keepalive)
    finally:
        await layer.group_discard(group, channel)


async def _received(layer, group: str, channel: str, keepalive: float):
    while True:
        try:
            message = await asyncio.wait_for(layer.receive(channel), keepalive)
        except TimeoutError:
            yield None
            await layer.group_add(group, channel)  # keeps the membership from expiring
            continue
        yield {"kind": message["kind"], "data": message["data"]}


def sse_event(event: dict | None) -> bytes:
    """One event as server-sent events write it; None is a comment line (a keep-alive)."""
    if event is None:
        return b": keep-alive\n\n"
    data = json.dumps(event["data"], ensure_ascii=False, separators=(",", ":"))
    return f"event: {event['kind']}\ndata: {data}\n\n".encode()
