"""A Stop through another process is confirmed however much relay traffic waits for the turn's
process (issue #31, point 10: 6 of 60 were not confirmed in time on a healthy Redis).

channels_redis queues the messages of all of a process's channels in one Redis key, popped
one at a time. The test fills the key of the default layer of the process running the turn
(B, in process) with relayed messages for its followers, as a process with many followers
has; a Stop sent through A must still be acknowledged, since control messages have a layer
of their own (rojos.turns.control_layer). Before, it waited behind the backlog and A answered 503.
"""

import os
import threading
import time

import pytest
import redis
from django.db import connection

from tests.support import layer_per_loop
from tests.support.fake_provider import Gate, stream, text_chunks
from tests.support.helpers import make_rojo
from tests.support.live_server import parse_sse, read_until

pytestmark = pytest.mark.django_db(transaction=True)

BACKLOG = 30_000  # relayed messages waiting for process B's followers


def default_layers_of_this_process() -> list:
    """The default layer objects of this process's event loops (the live server's among them)."""
    layers = [layer for key, layer in layer_per_loop._lazily_made.items() if key == "default"]
    for per_key in list(layer_per_loop._per_loop.values()):
        layers += [own for key, (_, own) in per_key.items() if key == "default"]
    return layers


def backlog_key(layer) -> str:
    """The Redis key holding the messages of all the process's channels on `layer`."""
    return f"{layer.prefix}specific.{layer.client_prefix}!"


def relay_backlog_add(layer, count: int) -> None:
    """Queue `count` relayed messages for followers of this process on `layer`'s key."""
    key = backlog_key(layer)
    client = redis.Redis.from_url(os.environ["REDIS_URL"])
    try:
        now = time.time()
        for start in range(0, count, 5_000):
            members = {
                layer.serialize(
                    {
                        "type": "turn.events",
                        "after": n,
                        "events": [[n + 1, "CHAT", {"text": "w "}]],
                        "__asgi_channel__": f"specific.{layer.client_prefix}!follower{n % 50}",
                    }
                ): now
                for n in range(start, min(start + 5_000, count))
            }
            client.zadd(key, members)
        client.expire(key, 120)
    finally:
        client.close()


def relay_backlog_left(layers) -> int:
    """The relayed messages still queued for B's followers on `layers`' keys."""
    client = redis.Redis.from_url(os.environ["REDIS_URL"])
    try:
        return sum(client.zcard(key) for key in {backlog_key(layer) for layer in layers})
    finally:
        client.close()


def test_a_stop_is_confirmed_behind_a_backlog_of_relayed_chunks(
    server_process, client_for, users, project, fake_provider, settings
):
    """Thousands of relayed chunks wait in the queue of B, which runs the turn: the Stop sent
    through A is acknowledged while they still wait (not after them, nor a 503) and the turn
    ends as stopped."""
    if not os.environ.get("REDIS_URL") or connection.vendor != "postgresql":
        pytest.skip("runs with REDIS_URL and a PostgreSQL DATABASE_URL set")
    # Time enough for a confirmation on a loaded machine: whether it waited behind the
    # backlog is told by the backlog, still there or not when it came.
    a = server_process(ROJO_RELAY_CONFIRM_SECONDS="60")
    on_b = client_for(users["editor"])
    on_a = client_for(users["editor"], base_url=a.base_url)
    rojo = make_rojo(fake_provider.base_url)
    chunks = text_chunks("w " * 400, pieces=400)
    chunks.insert(10, Gate(answered := threading.Event()))  # runs until the Stop is answered
    fake_provider.add(stream(*chunks, delay=0.05))

    layers = []
    try:
        with on_b.chat_stream(project.pk, rojo=rojo.slug, message="Talk") as response:
            events = parse_sse(response.iter_lines())
            seen = read_until(events, "CHAT", count=3)
            layers = default_layers_of_this_process()  # the live server's made by now
            assert layers
            for layer in layers:
                relay_backlog_add(layer, BACKLOG)
            stopped = on_a.post(f"/api/conversations/{seen[0].data['conversation']}/stop")
            waiting = relay_backlog_left(layers)
            answered.set()
            rest = list(events)
    finally:  # the next tests' relays use these layers
        client = redis.Redis.from_url(os.environ["REDIS_URL"])
        for key in {backlog_key(layer) for layer in layers}:
            client.delete(key)
        client.close()

    assert stopped.status_code == 200, stopped.text
    assert stopped.json() == {"stopping": True}
    assert waiting > 0, "the Stop was confirmed only once the relayed chunks were all popped"
    assert [e.type for e in rest][-2:] == ["ERROR", "DONE"]
    assert rest[-2].data["code"] == "stopped"
