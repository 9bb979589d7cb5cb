"""What a file's first bytes say when tar cannot read even its first header: that it is no
tar archive at all (a text file, a zip, an empty file), or one damaged or cut short there.

tarfile raises the same ReadError for both, but they ask different things of the operator:
the wrong file was named, or the right one is broken.
"""

import zlib
from typing import BinaryIO

from .manifest import HEADER_NAME

_KEPT = 64 << 10  # more than tarfile reads (compressed) before its first header fails
_GZIP = b"\x1f\x8b"
_MAGIC = slice(257, 262)  # where a POSIX tar header says "ustar"
# The start of what `backup` writes first: its header member's name, NUL-padded.
_FIRST_NAME = HEADER_NAME.encode().ljust(100, b"\0")


class FirstBytes:
    """A reader that keeps the first bytes read through it, for `not_a_tar`."""

    def __init__(self, source: BinaryIO) -> None:
        self.source, self.start = source, bytearray()

    def read(self, size: int = -1) -> bytes:
        block = self.source.read(size)
        if len(self.start) < _KEPT:
            self.start += block[: _KEPT - len(self.start)]
        return block


def not_a_tar(start: bytes) -> str | None:
    """Why a file beginning with `start`, whose first tar header could not be read, is no
    tar archive; None when it may be one, damaged or cut short."""
    if not start:
        return "an empty file, not a tar archive"
    if start[:2] == _GZIP:  # `backup` compresses with gzip; what it holds decides
        try:
            start = zlib.decompressobj(wbits=31).decompress(start, 512)
        except zlib.error:
            return None  # a damaged gzip stream: an archive's, for all one can tell
        if not start:
            return None  # cut inside gzip's own header
    if len(start) >= _MAGIC.stop:
        return None if start[_MAGIC] == b"ustar" else "not a tar archive"
    return None if _FIRST_NAME.startswith(start[:100]) else "not a tar archive"
