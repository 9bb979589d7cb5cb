"""A folder (or the whole project) written as a .zip while it is sent, never whole in memory.

Walked on descriptors with links not followed: only regular files of one link go in, named
from the folder, as the gate reads them.
"""

import os
import stat
import time
import zipfile
from collections.abc import Callable
from pathlib import Path, PurePosixPath

from .beneath import opened
from .paths import is_temp_file

_BLOCK = 1 << 16


class _Sink:
    """A write-only file for zipfile that hands what it gets on in blocks."""

    def __init__(self, emit: Callable[[bytes], None], block: int = 1 << 18) -> None:
        self.emit, self.block, self.buffer = emit, block, bytearray()

    def write(self, data) -> int:
        self.buffer += data
        if len(self.buffer) >= self.block:
            self.emit(bytes(self.buffer))
            self.buffer.clear()
        return len(data)

    def flush(self) -> None:
        if self.buffer:
            self.emit(bytes(self.buffer))
            self.buffer.clear()


def _add_file(archive: zipfile.ZipFile, dir_fd: int, name: str, arcname: str) -> None:
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
    except OSError:
        return  # gone meanwhile, or a link swapped in: not part of the archive
    with os.fdopen(fd, "rb") as source:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink > 1:
            return  # the gate reads no special file nor one with other hard links
        info = zipfile.ZipInfo(arcname, time.localtime(max(st.st_mtime, 315532800))[:6])
        info.compress_type = zipfile.ZIP_DEFLATED
        info.external_attr = (stat.S_IFREG | 0o644) << 16
        with archive.open(info, "w", force_zip64=True) as target:
            for block in iter(lambda: source.read(_BLOCK), b""):
                target.write(block)


def zip_write(project_root: Path, relative: str, emit: Callable[[bytes], None]) -> None:
    """(Blocking) Write a folder of the project (or the root, for "") as a .zip to `emit`.

    Walked on descriptors with links not followed: only regular files of one link go in,
    named from the folder; nothing is built in memory past one block.
    """
    sink = _Sink(emit)
    with opened(project_root, relative or ".") as root:
        top = root.open_dir(relative or ".")
        try:
            # Level 1: a folder of already compressed files costs little CPU time per MB.
            with zipfile.ZipFile(sink, "w", compresslevel=1) as archive:
                for dirpath, dirnames, filenames, dir_fd in os.fwalk(".", dir_fd=top):
                    dirnames[:] = sorted(d for d in dirnames if not is_temp_file(d))
                    for name in sorted(filenames):
                        if not is_temp_file(name):
                            arcname = str(PurePosixPath(dirpath, name))
                            _add_file(archive, dir_fd, name, arcname)
        finally:
            os.close(top)
    sink.flush()
