"""A throw-away copy of a project's files, for re-running a conversation without changing them."""

import contextlib
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def scratch_copy(root: Path) -> Iterator[Path]:
    """A temporary copy of a project's files, removed afterwards."""
    scratch = Path(tempfile.mkdtemp(prefix="rojo-rerun-"))
    try:
        copy = scratch / "root"
        if root.is_dir():
            shutil.copytree(root, copy, symlinks=True)
        else:
            copy.mkdir()
        yield copy
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
