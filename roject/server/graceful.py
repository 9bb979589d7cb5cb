"""uvicorn with a graceful stop: what `manage.py serve` (the image) runs.

uvicorn alone, on SIGTERM, waits for open connections without a bound of ours, then for
nothing else: a reply whose client had left (turns outlive their connection) was cut at
once, its turn left `running` and its text since the last draft lost. Here the first SIGTERM
(or SIGINT) starts a drain instead:

1. this process stops taking new turns and /readyz answers 503 (roject/server/draining.py);
2. the shutdown hooks run (ROJO_SHUTDOWN_HOOKS, by dotted string: roject imports nothing of
   rojos): rojos lets running turns finish for up to ROJO_SHUTDOWN_GRACE_SECONDS, then ends
   the rest as interrupted, their text kept and their followers told;
3. uvicorn's own shutdown follows: it closes the listening socket and gives open
   connections (followers of turns now ended, live news) a few seconds.

A second signal stops at once, as uvicorn's does.
"""

import asyncio
import logging
import signal

import uvicorn
from django.conf import settings
from django.utils.module_loading import import_string

from .draining import draining_begin
from .exit_wake import ExitWokenServer

logger = logging.getLogger(__name__)

# What uvicorn gives open connections once the turns are done (seconds).
CONNECTIONS_SECONDS = 5


class GracefulServer(ExitWokenServer):
    """uvicorn's server, whose first exit signal drains the turns before it stops."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._drain: asyncio.Task | None = None

    async def serve(self, sockets=None) -> None:
        self._loop = asyncio.get_running_loop()
        await super().serve(sockets)

    def handle_exit(self, sig: int, frame) -> None:
        if self._drain is not None or self._loop is None or self.should_exit:
            super().handle_exit(sig, frame)  # a second signal: at once
            if self._drain is not None:
                self.force_exit = True
            return
        draining_begin()
        logger.info("%s: draining (up to %s s)", signal.Signals(sig).name, self._grace())
        self._loop.call_soon_threadsafe(self._drain_start, sig, frame)

    def _drain_start(self, sig: int, frame) -> None:
        self._drain = self._loop.create_task(self._drained(sig, frame))

    async def _drained(self, sig: int, frame) -> None:
        try:
            for hook in settings.ROJO_SHUTDOWN_HOOKS:
                await import_string(hook)(grace=self._grace())
        except Exception:
            logger.exception("a shutdown hook failed; stopping anyway")
        finally:
            super().handle_exit(sig, frame)

    @staticmethod
    def _grace() -> float:
        return settings.ROJO_SHUTDOWN_GRACE_SECONDS


def graceful_serve(*, host: str, port: int, forwarded_allow_ips: str = "") -> None:
    """Serve the app with uvicorn and httptools' parser (docs/operations.md) until stopped."""
    config = uvicorn.Config(
        "roject.asgi:application",
        host=host,
        port=port,
        http="httptools",
        lifespan="off",
        server_header=False,
        timeout_graceful_shutdown=CONNECTIONS_SECONDS,
        proxy_headers=bool(forwarded_allow_ips),
        forwarded_allow_ips=forwarded_allow_ips or None,
    )
    GracefulServer(config).run()
