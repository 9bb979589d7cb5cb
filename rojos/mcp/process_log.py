"""A stdio server's stderr, line by line into our log, and the process found by its pipe.

The SDK hands the child a file for its stderr; this gives it one end of a pipe, read by a
thread (it blocks; the event loop never does). The pipe also tells when the child and all
it started have exited (end of file), and which process it is: the child whose fd 2 is
this pipe (Linux's /proc), whose id the shutdown check and the exit hook need.
"""

import contextlib
import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path

logger = logging.getLogger("rojos.mcp")


class StderrPipe:
    """A pipe for a child's stderr; `on_end` runs (in the thread) when every writer closed.
    Each line is logged as `scrubbed` returns it: a server may print the key it was given."""

    def __init__(
        self, label: str, on_end: Callable[[], None], scrubbed: Callable[[str], str] = str
    ) -> None:
        read_fd, write_fd = os.pipe()
        self.label = label
        self.inode = os.fstat(write_fd).st_ino
        self.writer = os.fdopen(write_fd, "w")
        self._reader = os.fdopen(read_fd, "rb")
        self._on_end = on_end
        self._scrubbed = scrubbed
        self._thread = threading.Thread(target=self._pump, name=f"mcp-stderr-{label}", daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        with self._reader:
            for raw in self._reader:
                line = raw.decode("utf-8", "replace").rstrip()
                if line:
                    logger.info("MCP server %s: %s", self.label, self._scrubbed(line))
        self._on_end()

    def spawned(self) -> None:
        """The child has its copy: close ours, so the end of the file means it exited."""
        with contextlib.suppress(OSError):
            self.writer.close()

    def child_pid(self) -> int | None:
        """The child of this process whose stderr is this pipe."""
        for task in Path(f"/proc/{os.getpid()}/task").glob("*/children"):
            with contextlib.suppress(OSError):
                for pid in task.read_text().split():
                    with contextlib.suppress(OSError):
                        if os.stat(f"/proc/{pid}/fd/2").st_ino == self.inode:
                            return int(pid)
        return None
