"""The Redis channel layer of the settings queues a burst past its connection pool's size
instead of failing it: in a burst of turn starts each joins its group at once."""

import json
import os
import subprocess
import sys

from tests.server.test_settings import REPO_ROOT, SETTINGS_VARIABLES
from tests.support.own_services import own_redis  # noqa: F401 (a fixture)

BURST = """
import asyncio, json
import django
django.setup()
from channels.layers import get_channel_layer

async def one(layer, n):
    channel = await layer.new_channel()
    await layer.group_add(f"burst-{n}", channel)
    await layer.group_discard(f"burst-{n}", channel)
    return True

async def main():
    layer = get_channel_layer()
    outcomes = await asyncio.gather(*(one(layer, n) for n in range(300)), return_exceptions=True)
    print(json.dumps({
        "backend": type(layer).__name__,
        "joined": sum(o is True for o in outcomes),
        "errors": sorted({type(o).__name__ for o in outcomes if isinstance(o, BaseException)}),
    }))

asyncio.run(main())
"""


def test_a_burst_of_300_group_joins_on_a_pool_of_3_connections_all_succeed(own_redis, tmp_path):  # noqa: F811
    env = {k: v for k, v in os.environ.items() if k not in SETTINGS_VARIABLES}
    env |= {
        "DJANGO_SETTINGS_MODULE": "roject.settings",
        "DEBUG": "1",
        "REDIS_URL": own_redis.url,
        "ROJO_REDIS_POOL_SIZE": "3",
        "ROJO_STORAGE_DIR": str(tmp_path / "storage"),
    }
    run = subprocess.run(
        [sys.executable, "-c", BURST], cwd=REPO_ROOT, env=env, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    outcome = json.loads(run.stdout.strip().splitlines()[-1])
    assert outcome == {"backend": "BlockingPoolRedisChannelLayer", "joined": 300, "errors": []}
