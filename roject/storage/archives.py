"""An uploaded .zip unpacked with every entry checked (a folder sent as a .zip is
./zip_downloads.py).

Unpacking refuses, entry by entry and with a reason, what a hostile archive holds: names
that climb out (`..`) or are absolute, links, devices and other special files, entries over
the per-file limit, ones that inflate past a ratio of their compressed size (a zip bomb),
and whatever would take the total past the upload's limit; what each entry really inflates
to is counted as it is written, whatever its header claims. It unpacks into a new directory
under incoming/ (outside the root), which the caller then moves in as one change.
"""

import os
import re
import shutil
import stat
import uuid
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from django.utils.translation import ngettext

from .beneath import DIRECTORY_MODE, FILE_MODE
from .layout import incoming_dir_create
from .paths import (
    PathError,
    StorageError,
    check_form,
    disk_full,
    is_temp_file,
    no_room,
    reported,
)
from .uploads import Incoming

_BLOCK = 1 << 16
_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_DRIVE = re.compile(r"^[A-Za-z]:")
_SPECIAL = (stat.S_IFCHR, stat.S_IFBLK, stat.S_IFIFO, stat.S_IFSOCK)
_NAME_MAX = 255  # bytes in one name component (Linux's NAME_MAX)
_UPLOAD = "the upload"  # what a full disk's error names
# What reading or writing one damaged or odd entry raises: a skipped entry, never a 500.
_ENTRY_ERRORS = (OSError, NotImplementedError, RuntimeError, EOFError, zlib.error, ValueError)


@dataclass(frozen=True, kw_only=True)
class ZipLimits:
    max_file_bytes: int
    max_total_bytes: int
    max_ratio: int
    max_entries: int
    folder: str = ""  # where the entries go in the project: their paths count from it


@dataclass
class Unpacked:
    """An archive unpacked under incoming/: what was taken and what was skipped, and why."""

    incoming: Incoming
    extracted: list[str] = field(default_factory=list)
    skipped: list[dict] = field(default_factory=list)


class _Skip(Exception):
    """This entry is refused; the message says why."""


def _entry_name(info: zipfile.ZipInfo, folder: str) -> list[str]:
    """The parts of an entry's name, or _Skip for one that may not be unpacked (as its
    path in the project, under `folder`, would be over the gate's length or depth)."""
    name = info.filename
    if "\0" in name or "\\" in name:
        raise _Skip("its name has a backslash or NUL character")
    if name.startswith("/") or _DRIVE.match(name):
        raise _Skip("its name is an absolute path")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise _Skip("its name climbs out of the folder ('..')")
    if not parts:
        raise _Skip("it has no name")
    if any(len(p.encode("utf-8", "surrogatepass")) > _NAME_MAX for p in parts):
        raise _Skip(f"a part of its name is over {_NAME_MAX} bytes")
    try:
        check_form("/".join([folder, *parts]) if folder else "/".join(parts))
    except PathError as error:
        raise _Skip(str(error).replace("path ", "its path ", 1)) from None
    if any(is_temp_file(p) for p in parts):
        raise _Skip("its name is reserved for the server's temporary files")
    mode = info.external_attr >> 16
    if info.create_system == 3 and stat.S_ISLNK(mode):
        raise _Skip("it is a symbolic link")
    if info.create_system == 3 and stat.S_IFMT(mode) in _SPECIAL:
        raise _Skip("it is a device or other special file")
    if info.flag_bits & 0x1:
        raise _Skip("it is encrypted")
    return parts


def _size_check(info: zipfile.ZipInfo, limits: ZipLimits, total: int) -> None:
    if info.file_size > limits.max_file_bytes:
        raise _Skip(f"it is over the per-file limit of {limits.max_file_bytes:,} bytes")
    if info.file_size > max(info.compress_size, 1) * limits.max_ratio:
        raise _Skip(f"it inflates over {limits.max_ratio} times its size (a zip bomb?)")
    if total + info.file_size > limits.max_total_bytes:
        raise _Skip(f"it takes the upload over its limit of {limits.max_total_bytes:,} bytes")


def _directory(top: int, parts: list[str]) -> int:
    """Open (making) the directory `parts` under the open directory `top`; links refused."""
    fd = os.dup(top)
    for part in parts:
        try:
            os.mkdir(part, DIRECTORY_MODE, dir_fd=fd)
            os.chmod(part, DIRECTORY_MODE, dir_fd=fd, follow_symlinks=False)
        except FileExistsError:
            pass
        except OSError as exc:
            os.close(fd)
            if no_room(exc):  # no entry fits either: the whole upload fails, nothing kept
                raise disk_full(_UPLOAD) from exc
            raise _Skip(f"its folder cannot be made ({exc.strerror})") from None
        try:
            inner = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
        except (NotADirectoryError, OSError):
            os.close(fd)
            raise _Skip("its folder is a file in the archive") from None
        os.close(fd)
        fd = inner
    return fd


def _extract(archive: zipfile.ZipFile, info: zipfile.ZipInfo, top: int, parts: list[str]) -> int:
    """Write one entry under `top`; returns the bytes it really inflated to."""
    fd = _directory(top, parts[:-1])
    try:
        try:
            out = os.open(parts[-1], _NEW, FILE_MODE, dir_fd=fd)
        except FileExistsError:
            raise _Skip("another entry has the same name") from None
        except OSError as exc:
            if no_room(exc):
                raise disk_full(_UPLOAD) from exc
            raise _Skip(f"it cannot be written ({exc.strerror})") from None
        written = 0
        try:
            with archive.open(info) as source, os.fdopen(out, "wb") as target:
                for block in iter(lambda: source.read(_BLOCK), b""):
                    written += len(block)
                    if written > info.file_size:
                        raise _Skip("it inflates to more than its header says")
                    target.write(block)
                os.fchmod(target.fileno(), FILE_MODE)
        except NotImplementedError:
            os.unlink(parts[-1], dir_fd=fd)
            raise _Skip("its compression method is not supported") from None
        except (_Skip, zipfile.BadZipFile, *_ENTRY_ERRORS) as exc:
            os.unlink(parts[-1], dir_fd=fd)
            if no_room(exc):  # not a damaged entry: the disk is full
                raise disk_full(_UPLOAD) from exc
            raise exc if isinstance(exc, _Skip) else _Skip("it is damaged") from exc
        return written
    finally:
        os.close(fd)


# Bytes of central directory allowed per entry allowed: a name of ROJO's longest path plus
# the headers and extra fields, with room to spare.
_DIRECTORY_BYTES_PER_ENTRY = 1024


def _directory_check(path: Path, limits: ZipLimits) -> None:
    """Refuse an archive of too many entries from its end record, before zipfile reads the
    central directory: it builds an object for every entry there, whatever their count."""
    try:
        with open(path, "rb") as source:
            end = zipfile._EndRecData(source)
    except (OSError, zipfile.BadZipFile):
        end = None
    if not end:
        raise StorageError("the upload is not a readable .zip archive")
    entries, size = end[zipfile._ECD_ENTRIES_TOTAL], end[zipfile._ECD_SIZE]
    if entries > limits.max_entries:
        raise StorageError(
            f"the archive has {entries:,} entries, over the limit of {limits.max_entries:,}"
        )
    if size > max(limits.max_entries, 1) * _DIRECTORY_BYTES_PER_ENTRY:
        raise StorageError(
            f"the archive's list of entries ({size:,} bytes) is over the limit for "
            f"{limits.max_entries:,} entries"
        )


def zip_unpack(*, project_id: int, archive_file: Incoming, limits: ZipLimits) -> Unpacked:
    """(Blocking) Unpack a received .zip into a new directory under incoming/.

    Whatever goes wrong part way, the directory and all it holds so far are removed before
    the error goes on: a failed unpack leaves nothing on the disk.
    """
    _directory_check(archive_file.path, limits)
    try:
        archive = zipfile.ZipFile(archive_file.path)
    except (zipfile.BadZipFile, OSError):
        raise StorageError("the upload is not a readable .zip archive") from None
    directory = incoming_dir_create(project_id) / uuid.uuid4().hex
    with reported(_UPLOAD):
        os.mkdir(directory, 0o700)
    try:
        with archive:
            return _unpack_into(archive, directory, limits)
    except BaseException:
        shutil.rmtree(directory, ignore_errors=True)
        raise


def _unpack_into(archive: zipfile.ZipFile, directory: Path, limits: ZipLimits) -> Unpacked:
    unpacked = Unpacked(incoming=Incoming(path=directory, size=0))
    total = 0
    top = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        infos = archive.infolist()
        for info in infos[: limits.max_entries]:
            try:
                parts = _entry_name(info, limits.folder)
                if info.is_dir():
                    os.close(_directory(top, parts))
                    continue
                _size_check(info, limits, total)
                total += _extract(archive, info, top, parts)
                unpacked.extracted.append("/".join(parts))
            except _Skip as why:
                unpacked.skipped.append({"name": info.filename, "reason": str(why)})
        if len(infos) > limits.max_entries:  # its end record said fewer: one line for all
            more = len(infos) - limits.max_entries
            unpacked.skipped.append(
                {
                    "name": infos[limits.max_entries].filename,
                    "reason": f"{more:,} more {ngettext('entry', 'entries', more)} not "
                    f"unpacked (the limit is {limits.max_entries:,} "
                    f"{ngettext('entry', 'entries', limits.max_entries)})",
                }
            )
    finally:
        os.close(top)
    unpacked.incoming = Incoming(path=directory, size=total)
    return unpacked
