"""The archive: one tar, written and read as a stream, each part checked by its SHA-256.

Its members, in order: the header (`rojo-backup/header.json`), every project's storage
(`storage/<project>/root/...`, `storage/<project>/undo/...`), the database
(`database/<nnnn>-<model>.jsonl`: a line naming the model and its columns, then a JSON array
a row, a table split in parts of at most PART_BYTES) and the manifest
(`rojo-backup/manifest.json`), which comes last because only then are the digests known.
A tar is written front to back, so nothing is ever held whole: a file's bytes go from the
disk to the archive in blocks, and a database part is spooled to a temporary file (a tar
member's size comes before its bytes). `.gz` at the end of the name compresses it.

Reading checks as it goes: every member's digest and count against the manifest, which
must come last and name exactly what came before. A cut, a flipped byte or a changed file
shows as a BackupError naming what differs; gzip's and tar's own errors are words too.
"""

import contextlib
import gzip
import hashlib
import io
import tarfile
import tempfile
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

import orjson

from roject.storage.backups import StoredEntry

from .errors import BackupError
from .manifest import HEADER_NAME, MANIFEST_NAME, Manifest

PART_BYTES = 64 << 20
_SPOOL_BYTES = 4 << 20
_BLOCK = 1 << 20
_KINDS = {"dir": tarfile.DIRTYPE, "file": tarfile.REGTYPE, "link": tarfile.SYMTYPE}
_TAR_KINDS = {value: key for key, value in _KINDS.items()}


def _json(value) -> bytes:
    try:
        return orjson.dumps(value)
    except TypeError:  # an integer past 64 bits in a JSON field: the standard library's
        import json

        return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def entry_digest_start(name: str, entry: StoredEntry) -> "hashlib._Hash":
    """A storage entry's digest, begun with what its tar header says of it."""
    head = f"{name}\0{entry.kind}\0{entry.mode:o}\0{entry.size}\0{entry.target}\0{entry.mtime}\n"
    return hashlib.sha256(head.encode("utf-8", "surrogateescape"))


class _Hashing(io.RawIOBase):
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
class _ProjectCount:
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
        self._projects: dict[int, _ProjectCount] = {}
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
            self.tar.addfile(info, _Hashing(content, digest))
        else:
            self.tar.addfile(info)
        count = self._projects.setdefault(int(project_id), _ProjectCount())
        count.add(entry, digest.hexdigest())

    def project_seen(self, project_id: int) -> None:
        """Count a project whose storage is empty (so the manifest names it)."""
        self._projects.setdefault(int(project_id), _ProjectCount())

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
        self.tar.addfile(info, _Hashing(spool, digest))
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


# What a reader does with each part (nothing, for a check): a storage entry with its
# content, and a database part (its model label, columns and rows, parsed as read).
OnEntry = Callable[[int, StoredEntry, BinaryIO | None], None]
OnRows = Callable[[str, list[str], Iterator[list]], None]
OnHeader = Callable[[dict], None]


@contextlib.contextmanager
def _words():
    """tar's and gzip's errors (a cut, a corruption) and a value that does not parse as a
    BackupError; other errors (a full disk while restoring) pass as they are."""
    try:
        yield
    except BackupError:
        raise
    except (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise BackupError(
            f"the archive is damaged or cut short ({type(exc).__name__}: {exc})"
        ) from exc
    except ValueError as exc:  # a row's value that is not what its column holds
        raise BackupError(f"the archive holds a malformed value ({exc})") from exc


def archive_read(
    fileobj: BinaryIO,
    *,
    on_header: OnHeader | None = None,
    on_entry: OnEntry | None = None,
    on_rows: OnRows | None = None,
) -> Manifest:
    """Read an archive front to back, checking it whole; returns its manifest.

    Each part goes to the callbacks as it is read, before the manifest that vouches for it
    is reached: a restore runs in a transaction and a staging directory, and gives up both
    when this raises.
    """
    with _words(), tarfile.open(fileobj=fileobj, mode="r|*") as tar:
        reading = _Reading(on_header, on_entry, on_rows)
        for member in tar:
            reading.member(tar, member)
        return reading.finished()


class _Reading:
    """The state of one read of an archive: what came, and its digests."""

    def __init__(self, on_header, on_entry, on_rows) -> None:
        self.on_header, self.on_entry, self.on_rows = on_header, on_entry, on_rows
        self.header: dict | None = None
        self.header_sha256 = ""
        self.manifest: Manifest | None = None
        self.projects: dict[int, _ProjectCount] = {}
        self.parts: list[dict] = []

    def member(self, tar: tarfile.TarFile, member: tarfile.TarInfo) -> None:
        if self.manifest is not None:
            raise BackupError(f"the archive holds {member.name!r} after its manifest")
        if self.header is None:
            if member.name != HEADER_NAME:
                raise BackupError("this is no Rojo backup (it does not start with its header)")
            data = _small(tar, member)
            self.header_sha256 = hashlib.sha256(data).hexdigest()
            self.header = _parsed(data, "header")
            if self.on_header is not None:
                self.on_header(self.header)
        elif member.name == MANIFEST_NAME:
            self.manifest = Manifest.from_json(_parsed(_small(tar, member), "manifest"))
        elif member.name.startswith("storage/"):
            self._entry(tar, member)
        elif member.name.startswith("database/") and member.isfile():
            self._part(tar, member)
        else:
            raise BackupError(f"the archive holds an unknown member {member.name!r}")

    def _entry(self, tar: tarfile.TarFile, member: tarfile.TarInfo) -> None:
        name = member.name.rstrip("/")  # tar writes a directory's name with a slash
        parts = name.split("/", 2)
        project, path = (parts[1], parts[2]) if len(parts) == 3 else ("", "")
        kind = _TAR_KINDS.get(member.type)
        if not project.isdigit() or not path or kind is None:
            raise BackupError(f"the archive holds a storage entry not allowed: {member.name!r}")
        entry = StoredEntry(
            path=path,
            kind=kind,
            mode=member.mode & 0o7777,
            mtime=int(member.mtime),
            size=member.size if kind == "file" else 0,
            target=member.linkname if kind == "link" else "",
        )
        digest = entry_digest_start(name, entry)
        content = None
        if kind == "file":
            content = _Hashing(tar.extractfile(member), digest)
        if self.on_entry is not None:
            self.on_entry(int(project), entry, content)
        if content is not None:
            while content.read(_BLOCK):  # what the callback left unread, digested
                pass
        self.projects.setdefault(int(project), _ProjectCount()).add(entry, digest.hexdigest())

    def _part(self, tar: tarfile.TarFile, member: tarfile.TarInfo) -> None:
        digest = hashlib.sha256()
        source = _Hashing(tar.extractfile(member), digest)
        lines = _lines(source)
        head = _parsed(next(lines, b"{}"), member.name)
        label, columns = head.get("model"), head.get("columns")
        if not isinstance(label, str) or not isinstance(columns, list):
            raise BackupError(f"the archive's {member.name!r} does not name its table")
        counted = [0]

        def rows() -> Iterator[list]:
            for line in lines:
                row = _parsed(line, member.name)
                if not isinstance(row, list) or len(row) != len(columns):
                    raise BackupError(f"the archive's {member.name!r} holds a malformed row")
                counted[0] += 1
                yield row

        if self.on_rows is not None:
            self.on_rows(label, columns, rows())
        for _ in rows():  # the rest, counted and digested
            pass
        self.parts.append(
            {
                "member": member.name,
                "model": label,
                "rows": counted[0],
                "bytes": member.size,
                "sha256": digest.hexdigest(),
            }
        )

    def finished(self) -> Manifest:
        if self.header is None:
            raise BackupError("the archive is empty")
        if self.manifest is None:
            raise BackupError("the archive is cut short: its manifest is missing")
        manifest = self.manifest
        if manifest.header_sha256 != self.header_sha256 or manifest.header != self.header:
            raise BackupError("the archive's header does not match its manifest (tampered?)")
        expected = [
            {key: table.get(key) for key in ("member", "model", "rows", "bytes", "sha256")}
            for table in manifest.tables
        ]
        for want, got in zip(expected, self.parts, strict=False):
            if want != got:
                raise BackupError(
                    f"the archive's {got['member']!r} differs from its manifest "
                    "(corrupted or tampered)"
                )
        if len(expected) != len(self.parts):
            raise BackupError(
                f"the archive holds {len(self.parts)} database parts, its manifest {len(expected)}"
            )
        found = {str(pid): count.as_json() for pid, count in sorted(self.projects.items())}
        for pid in sorted(set(found) | set(manifest.projects), key=int):
            empty = _ProjectCount().as_json()
            if found.get(pid, empty) != manifest.projects.get(pid):
                raise BackupError(
                    f"the archive's storage of project {pid} differs from its manifest "
                    "(corrupted or tampered)"
                )
        return manifest


def _small(tar: tarfile.TarFile, member: tarfile.TarInfo) -> bytes:
    if not member.isfile() or member.size > 256 << 20:
        raise BackupError(f"the archive's {member.name!r} is not what it should be")
    return tar.extractfile(member).read()


def _parsed(data: bytes, what: str):
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise BackupError(f"the archive's {what} is not valid JSON ({exc})") from exc


def _lines(source: BinaryIO) -> Iterator[bytes]:
    """The lines of a stream, read in blocks (a line is as long as a row)."""
    rest = bytearray()
    while block := source.read(_BLOCK):
        start = len(rest)
        rest += block
        end = rest.rfind(b"\n", start)
        if end < 0:
            continue
        yield from bytes(rest[:end]).split(b"\n")
        del rest[: end + 1]
    if rest:
        yield bytes(rest)
