"""Whether a copy fits on the storage, asked before the first byte of it is written.

An undo snapshot copies what a call will replace. Started on a nearly full disk, it would use
the last free space on a copy that cannot finish, and the call itself, which might have
fitted, would then fail too. The copy's size is counted first (its files' bytes rounded up
to whole blocks, and a block for each entry) and compared with what statvfs says is free on
the filesystem the copy goes to, less a margin left for the call's own write.
"""

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from .paths import disk_full

# Left free after a snapshot, for the write the snapshot is taken for, and the database's.
MARGIN_BYTES = 256 * 1024

_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass
class Needed:
    """What a copy will write: its files' bytes and the entries (files, links, directories)."""

    sizes: list[int] = field(default_factory=list)
    entries: int = 0

    def add_entry(self, dir_fd: int, name: str) -> None:
        """Count an entry in an open directory, and everything under it (no link followed)."""
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        self._add(st)
        if not stat.S_ISDIR(st.st_mode):
            return
        top = os.open(name, _DIRECTORY, dir_fd=dir_fd)
        try:
            for _, dirnames, filenames, sub in os.fwalk(".", dir_fd=top):
                for entry in dirnames + filenames:
                    self._add(os.stat(entry, dir_fd=sub, follow_symlinks=False))
        finally:
            os.close(top)

    def _add(self, st: os.stat_result) -> None:
        self.entries += 1
        if stat.S_ISREG(st.st_mode):
            self.sizes.append(st.st_size)

    def bytes(self, block: int) -> int:
        """The bytes the copy takes on a filesystem of `block`-byte blocks."""
        whole = sum(-(-size // block) * block for size in self.sizes)
        return whole + self.entries * block


def _existing(path: Path) -> Path:
    """The path, or its nearest parent that exists: where it will be made."""
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def room_check(directory: Path, needed: Needed, label: str) -> None:
    """Raise DiskFull unless `needed` fits in `directory`'s filesystem with MARGIN_BYTES left.

    Inodes count too, on filesystems that have a fixed number of them.
    """
    fs = os.statvfs(_existing(directory))
    block = fs.f_frsize or fs.f_bsize
    free = fs.f_bavail * block
    if needed.bytes(block) + MARGIN_BYTES > free:
        raise disk_full(label)
    if fs.f_files and needed.entries >= fs.f_favail:
        raise disk_full(label)
