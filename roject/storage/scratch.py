"""A throw-away copy of a project's files, for re-running a conversation without changing them."""

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

from .beneath import DIRECTORY_MODE, Root
from .entries import tree_copy_into
from .leftovers import scratch_dir_make
from .paths import reported


@contextlib.contextmanager
def scratch_copy(root: Path) -> Iterator[Path]:
    """A temporary copy of a project's files, removed afterwards.

    Copied from the root's descriptor down, links as links; a file with other hard links is
    left out (in the copy it would have one, and be read as the project's own).
    """
    scratch = scratch_dir_make()  # named for this process: removed after it if it crashes
    try:
        copy = scratch / "root"
        os.mkdir(copy, DIRECTORY_MODE)
        os.chmod(copy, DIRECTORY_MODE)
        if root.is_dir():
            # An entry that changes type while it is copied fails the copy, as a StorageError.
            with reported("."), Root(root) as source:
                target = os.open(copy, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
                try:
                    tree_copy_into(source.fd, target, label="", hard_links="skip")
                finally:
                    os.close(target)
        yield copy
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
