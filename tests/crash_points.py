"""Loaded into a server subprocess through ROJO_TOOL_MODULES: its atomic writes never finish.

A write's temporary file is written and fsynced, then the rename waits until the process is
killed: the moment at which a write that was not atomic would leave half a file behind.
"""

import os
import threading

_replace = os.replace


def _replace_or_hang(src, dst, **kwargs) -> None:
    if os.path.basename(src).startswith(".rojo-"):
        threading.Event().wait()
    _replace(src, dst, **kwargs)


os.replace = _replace_or_hang
