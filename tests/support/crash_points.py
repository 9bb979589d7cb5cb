"""Loaded into a server subprocess through ROJO_TOOL_MODULES: its atomic writes never finish.

A write's temporary file is written and fsynced, then the rename waits until the process is
killed: the moment at which a write that was not atomic would leave half a file behind. With
ROJO_TEST_HANG_AFTER_RENAME=1 the rename happens and the write waits after it, before its
result is stored: the moment after which the file changed but nothing yet says so.

With ROJO_TEST_HANG_BEFORE_START=1 a chat's start waits, for ever, just after its message
is stored (with its conversation, claimed, and the turn's record) and before START is sent:
the client has no status yet, and no conversation id.
"""

import asyncio
import os
import threading

_replace = os.replace
_AFTER = os.environ.get("ROJO_TEST_HANG_AFTER_RENAME") == "1"


def _replace_or_hang(src, dst, **kwargs) -> None:
    ours = os.path.basename(src).startswith(".rojo-")
    if ours and not _AFTER:
        threading.Event().wait()
    _replace(src, dst, **kwargs)
    if ours:
        threading.Event().wait()


os.replace = _replace_or_hang


class _NeverStarts:
    """A channel layer whose turns never get their channel."""

    async def new_channel(self, *args, **kwargs) -> str:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


if os.environ.get("ROJO_TEST_HANG_BEFORE_START") == "1":
    from rojos.turns import start as turn_start

    turn_start.control_layer = _NeverStarts
