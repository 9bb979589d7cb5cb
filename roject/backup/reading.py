"""Reading an archive (archive.py says its layout) front to back, checking it as it goes.

Every member's digest and count is checked against the manifest, which must come last and
name exactly what came before; the id sequences, which only the manifest holds, against
their own digest there. A cut, a flipped byte or a changed file shows as a
BackupError naming what differs; gzip's and tar's own errors are words too.
"""

import contextlib
import gzip
import hashlib
import json
import re
import tarfile
import zlib
from collections.abc import Callable, Iterator
from typing import BinaryIO

import orjson
from django.utils.translation import ngettext

from roject.storage import StorageError
from roject.storage.backups import StoredEntry, entry_path_checked

from .archive import BLOCK, ROW_BYTES, TAR_KINDS, Hashing, ProjectCount, entry_digest_start
from .errors import BackupError, NotAnArchive
from .first_bytes import FirstBytes, not_a_tar
from .manifest import HEADER_NAME, MANIFEST_NAME, Manifest

# What a reader does with each part (nothing, for a check): a storage entry with its
# content, and a database part (its model label, columns and rows, parsed as read).
OnEntry = Callable[[int, StoredEntry, BinaryIO | None], None]
OnRows = Callable[[str, list[str], Iterator[list]], None]
OnHeader = Callable[[dict], None]
# 19 digits in a row: every integer outside [-2**63, 2**64) has them (and far fewer others).
_WIDE_INTEGER = re.compile(rb"\d{19}")
# What tar and gzip raise for a file they cannot read (cut, corrupted, or no archive).
_UNREADABLE = (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile)


@contextlib.contextmanager
def _words():
    """tar's and gzip's errors (a cut, a corruption) and a value that does not parse as a
    BackupError; other errors (a full disk while restoring) pass as they are."""
    try:
        yield
    except BackupError:
        raise
    except _UNREADABLE as exc:
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
    with _words(), _opened(fileobj) as tar:
        reading = _Reading(on_header, on_entry, on_rows)
        for member in tar:
            reading.member(tar, member)
        return reading.finished()


def _opened(fileobj: BinaryIO) -> tarfile.TarFile:
    """tarfile's reader of the stream, which reads the first header; a file that is no tar
    at all (not one cut or damaged) is a NotAnArchive."""
    seen = FirstBytes(fileobj)
    try:
        return tarfile.open(fileobj=seen, mode="r|*")
    except _UNREADABLE as exc:
        why = not_a_tar(bytes(seen.start))
        if why:
            raise NotAnArchive(why) from exc
        raise


class _Reading:
    """The state of one read of an archive: what came, and its digests."""

    def __init__(self, on_header, on_entry, on_rows) -> None:
        self.on_header, self.on_entry, self.on_rows = on_header, on_entry, on_rows
        self.header: dict | None = None
        self.header_sha256 = ""
        self.manifest: Manifest | None = None
        self.projects: dict[int, ProjectCount] = {}
        self.parts: list[dict] = []

    def member(self, tar: tarfile.TarFile, member: tarfile.TarInfo) -> None:
        if self.manifest is not None:
            raise BackupError(f"the archive holds {member.name!r} after its manifest")
        if self.header is None:
            if member.name != HEADER_NAME:
                raise NotAnArchive("a tar archive, but it does not start with a backup's header")
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
        kind = TAR_KINDS.get(member.type)
        try:
            entry_path_checked(path, kind or "file")
        except StorageError as exc:
            raise BackupError(str(exc)) from exc
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
            content = Hashing(tar.extractfile(member), digest)
        if self.on_entry is not None:
            self.on_entry(int(project), entry, content)
        if content is not None:
            while content.read(BLOCK):  # what the callback left unread, digested
                pass
        self.projects.setdefault(int(project), ProjectCount()).add(entry, digest.hexdigest())

    def _part(self, tar: tarfile.TarFile, member: tarfile.TarInfo) -> None:
        digest = hashlib.sha256()
        source = Hashing(tar.extractfile(member), digest)
        lines = _lines(source, member.name)
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
            parts = len(self.parts)
            raise BackupError(
                f"the archive holds {parts} database {ngettext('part', 'parts', parts)}, its "
                f"manifest {len(expected)}"
            )
        if manifest.sequences_sha256 != manifest.sequences_digest():
            raise BackupError(
                "the archive's id sequences differ from their digest in its manifest "
                "(corrupted or tampered)"
            )
        found = {str(pid): count.as_json() for pid, count in sorted(self.projects.items())}
        for pid in sorted(set(found) | set(manifest.projects), key=int):
            empty = ProjectCount().as_json()
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
    """JSON read back as it was written: orjson, but where an integer may be wider than 64
    bits (archive.py writes those with the standard library), which orjson would read as a
    float near it, or refuse past a double's range; the standard library keeps them exact."""
    try:
        if _WIDE_INTEGER.search(data):
            return json.loads(data)
        return orjson.loads(data)
    except json.JSONDecodeError as exc:  # orjson's is one too
        raise BackupError(f"the archive's {what} is not valid JSON ({exc})") from exc


def _lines(source: BinaryIO, name: str) -> Iterator[bytes]:
    """The lines of a stream, read in blocks (a line is as long as a row); one longer than
    ROW_BYTES is refused before it is held whole (a compressed file of one endless line)."""
    rest = bytearray()
    while block := source.read(BLOCK):
        start = len(rest)
        rest += block
        end = rest.rfind(b"\n", start)
        if end >= 0:
            yield from bytes(rest[:end]).split(b"\n")
            del rest[: end + 1]
        if len(rest) > ROW_BYTES:
            raise BackupError(
                f"the archive's {name!r} holds a line longer than any row "
                f"({ROW_BYTES >> 20} MiB): it is damaged or not a backup"
            )
    if rest:
        yield bytes(rest)
