"""A file's version as people and rojos saw it: size, modification time and a hash.

A save from the editor and a rojo's write after a read both name the version they started
from; the change goes ahead only while the file is still at that version, so nobody's work
is overwritten unseen. Read from one open descriptor, so the three agree with each other.
"""

import hashlib
import os
from pathlib import Path

from .files import open_regular_file
from .paths import StorageError

_BLOCK = 1 << 16


def version_of(fh) -> dict:
    """The version of an open file, read from its descriptor (the position is moved)."""
    st = os.fstat(fh.fileno())
    hasher = hashlib.sha256()
    fh.seek(0)
    for block in iter(lambda: fh.read(_BLOCK), b""):
        hasher.update(block)
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": hasher.hexdigest()}


def file_version(project_root: Path, relative_path: str) -> dict | None:
    """(Blocking) The file's version now; None when nothing is there.

    Something that is no regular file (a directory, a FIFO) has a version that matches no
    file's, so a check against a file's version fails on it.
    """
    try:
        with open_regular_file(project_root, relative_path) as fh:
            return version_of(fh)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except StorageError as exc:
        if isinstance(exc.__cause__, FileNotFoundError | NotADirectoryError):
            return None  # reported by the gate, which names only the relative path
        return {"size": -1, "mtime_ns": 0, "sha256": "not a regular file"}


def same_version(a: dict | None, b: dict | None) -> bool:
    """Whether two versions name the same state of a file (the hash decides; a touched
    file with the same content is the same version)."""
    if a is None or b is None:
        return a is b
    return a.get("sha256") == b.get("sha256") and a.get("size") == b.get("size")
