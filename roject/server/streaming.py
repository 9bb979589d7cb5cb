"""A blocking producer of bytes (a file read, a .zip being written) as an async stream.

The producer runs in a thread of its own and hands each block over through a small queue:
it waits while the client is slow, so memory holds a few blocks, never the whole body, and
the event loop never blocks on the disk. When the client goes away, the producer's next
hand-over raises and it stops. A thread of its own, not the default executor: a download
lasts as long as the client takes, and would hold one of the executor's few workers.
"""

import asyncio
import threading
from collections.abc import AsyncIterator, Callable

Producer = Callable[[Callable[[bytes], None]], None]
_DONE = object()


class _Gone(Exception):
    """The consumer stopped listening."""


async def blocking_stream(produce: Producer, *, depth: int = 4) -> AsyncIterator[bytes]:
    """Run `produce(emit)` in a thread, yielding every block it emits, in order."""
    loop = asyncio.get_running_loop()
    blocks: asyncio.Queue = asyncio.Queue(maxsize=depth)
    gone = threading.Event()

    def hand_over(item) -> None:
        if gone.is_set():
            raise _Gone
        asyncio.run_coroutine_threadsafe(blocks.put(item), loop).result()

    def run() -> None:
        try:
            produce(hand_over)
        except _Gone:
            return
        except BaseException as exc:  # handed to the consumer, which raises it
            item = exc
        else:
            item = _DONE
        if not gone.is_set():
            asyncio.run_coroutine_threadsafe(blocks.put(item), loop)

    threading.Thread(target=run, name="blocking-stream", daemon=True).start()
    try:
        while True:
            item = await blocks.get()
            if item is _DONE:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        gone.set()
        while not blocks.empty():  # frees a producer waiting on a full queue
            blocks.get_nowait()
