"""The archive: one tar, written and read as a stream, each part checked by its SHA-256.

Its members, in order: the header (`rojo-backup/header.json`), every project's storage
(`storage/<project>/root/...`, `storage/<project>/undo/...`), the database
(`database/<nnnn>-<model>.jsonl`: a line naming the model and its columns, then a JSON array
a row, a table split in parts of at most PART_BYTES) and the manifest
(`rojo-backup/manifest.json`), which comes last because only then are the digests known.
A tar is written front to back, so nothing is ever held whole: a file's bytes go from the
disk to the archive in blocks, and a database part is spooled to a temporary file (a tar
member's size comes before its bytes). `.gz` at the end of the name compresses it.

Reading one, and checking it as it is read, is reading.py's; what both sides share (an
entry's digest, a project's counts) is here.
"""

import gzip
import hashlib
import io
import json
import tarfile
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

import orjson

from roject.storage.backups import StoredEntry

from .manifest import HEADER_NAME, MANIFEST_NAME, Manifest

PART_BYTES = 64 << 20
_SPOOL_BYTES = 4 << 20
BLOCK = 1 << 20
# The longest line a database part may hold: one row, far past any a real installation
# writes (a message with its images, a change's diffs). A reader refuses a longer one
# rather than holding it whole, so a small compressed file cannot fill the memory.
ROW_BYTES = 256 << 20
_KINDS = {"dir": tarfile.DIRTYPE, "file": tarfile.REGTYPE, "link": tarfile.SYMTYPE}
TAR_KINDS = {value: key for key, value in _KINDS.items()}


def _json(value) -> bytes:
    """A value as JSON, exact: orjson refuses an integer wider than 64 bits (a JSON field's),
    which the standard library writes whole (and reading.py's `_parsed` reads back so)."""
    try:
        return orjson.dumps(value)
    except TypeError:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def entry_digest_start(name: str, entry: StoredEntry) -> "hashlib._Hash":
    """A storage entry's digest, begun with what its tar header says of it."""
    head = f"{name}\0{entry.kind}\0{entry.mode:o}\0{entry.size}\0{entry.target}\0{entry.mtime}\n"
    return hashlib.sha256(head.encode("utf-8", "surrogateescape"))


class Hashing(io.RawIOBase):
    """A reader that adds what it reads to a digest (and to a project's)."""

    def __init__(self, source: BinaryIO, *digests) -> None:
        self.source, self.digests = source, digests

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        block = self.source.read(size)
        for digest in self.digests:
            digest.update(block)
        return block


@dataclass
class ProjectCount:
    digest: "hashlib._Hash" = field(default_factory=hashlib.sha256)
    files: int = 0
    directories: int = 0
    links: int = 0
    bytes: int = 0

    def add(self, entry: StoredEntry, entry_digest: str) -> None:
        self.digest.update(entry_digest.encode() + b"\n")
        self.files += entry.kind == "file"
        self.directories += entry.kind == "dir"
        self.links += entry.kind == "link"
        self.bytes += entry.size

    def as_json(self) -> dict:
        return {
            "files": self.files,
            "directories": self.directories,
            "links": self.links,
            "bytes": self.bytes,
            "sha256": self.digest.hexdigest(),
        }


class ArchiveWriter:
    """Writes an archive's members in order; `close` adds the manifest."""

    def __init__(self, fileobj: BinaryIO, *, header: dict, compress: bool) -> None:
        # gzip's default level, not tarfile's 9: several times faster for a few % more bytes.
        self._gzip = (
            gzip.GzipFile(fileobj=fileobj, mode="wb", compresslevel=6) if compress else None
        )
        self.tar = tarfile.open(  # noqa: SIM115  (closed by close(), after the manifest)
            fileobj=self._gzip or fileobj, mode="w|", format=tarfile.PAX_FORMAT
        )
        self.manifest = Manifest(header=header)
        self.manifest.header_sha256 = self._bytes_add(HEADER_NAME, _json(header))
        self._projects: dict[int, ProjectCount] = {}
        self._parts = 0

    def _bytes_add(self, name: str, data: bytes) -> str:
        info = tarfile.TarInfo(name)
        info.size, info.mode, info.mtime = len(data), 0o600, int(self._now())
        self.tar.addfile(info, io.BytesIO(data))
        return hashlib.sha256(data).hexdigest()

    @staticmethod
    def _now() -> float:
        return time.time()

    def storage_add(self, project_id: int, entry: StoredEntry, content: BinaryIO | None) -> None:
        """Add one entry of a project's storage, streaming a file's bytes."""
        name = f"storage/{int(project_id)}/{entry.path}"
        info = tarfile.TarInfo(name)
        info.type, info.mode, info.mtime = _KINDS[entry.kind], entry.mode, entry.mtime
        info.size = entry.size if entry.kind == "file" else 0
        info.linkname = entry.target
        digest = entry_digest_start(name, entry)
        if entry.kind == "file" and content is not None:
            self.tar.addfile(info, Hashing(content, digest))
        else:
            self.tar.addfile(info)
        count = self._projects.setdefault(int(project_id), ProjectCount())
        count.add(entry, digest.hexdigest())

    def project_seen(self, project_id: int) -> None:
        """Count a project whose storage is empty (so the manifest names it)."""
        self._projects.setdefault(int(project_id), ProjectCount())

    def table_add(self, label: str, table: str, columns: list[str], rows: Iterator[list]) -> None:
        """Add a table's rows, in parts of at most PART_BYTES (one part when it is empty)."""
        rows = iter(rows)
        head = _json({"model": label, "table": table, "columns": columns}) + b"\n"
        while True:
            with tempfile.SpooledTemporaryFile(max_size=_SPOOL_BYTES) as spool:
                spool.write(head)
                written, size, last = 0, len(head), True
                for row in rows:
                    line = _json(row) + b"\n"
                    spool.write(line)
                    written, size = written + 1, size + len(line)
                    if size >= PART_BYTES:
                        last = False
                        break
                self._part_add(label, table, spool, written, size)
            if last:
                return

    def _part_add(self, label: str, table: str, spool, rows: int, size: int) -> None:
        self._parts += 1
        name = f"database/{self._parts:04d}-{label}.jsonl"
        spool.seek(0)
        digest = hashlib.sha256()
        info = tarfile.TarInfo(name)
        info.size, info.mode, info.mtime = size, 0o600, int(self._now())
        self.tar.addfile(info, Hashing(spool, digest))
        self.manifest.tables.append(
            {
                "member": name,
                "model": label,
                "table": table,
                "rows": rows,
                "bytes": size,
                "sha256": digest.hexdigest(),
            }
        )

    def abandon(self) -> None:
        """Leave the archive unfinished (its write failed: a full disk), writing nothing
        more, now or when the streams are collected: tarfile's would flush its buffer into
        the closed file then, and print that error's traceback after the command's own."""
        self.tar.fileobj.closed = True  # tarfile's stream: its close writes what it holds
        self.tar.closed = True
        if self._gzip is not None:
            self._gzip.fileobj = None  # its close writes the trailer

    def close(self) -> Manifest:
        """Write the manifest and end the archive."""
        self.manifest.projects = {
            str(pid): count.as_json() for pid, count in sorted(self._projects.items())
        }
        self._bytes_add(MANIFEST_NAME, _json(self.manifest.as_json()))
        self.tar.close()
        if self._gzip is not None:
            self._gzip.close()  # its trailer; the file itself is the caller's
        return self.manifest
