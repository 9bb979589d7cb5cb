"""Files kept by their content beside a project's root: what messages attach (images, PDFs).

ROJO_STORAGE_DIR/<project_id>/<part>/<sha256> holds one file's bytes, outside the root: no
tool that works on the project's files reaches it, and a backup takes it (`backups.PARTS`).
A file is named by the SHA-256 of its bytes, so the same file attached twice is kept once and
a message refers to it by that name; it is uploaded before its message (and maybe its
conversation) exists, so it is the project's. Directories are 0700 and files 0600; a file is
written under a temporary name and renamed, so a reader never sees half of one. What a part
accepts is its module's to say (`images`, `pdfs`); who may read the project is checked by the
callers.
"""

import hashlib
import os
import re
from collections.abc import Iterable
from pathlib import Path

from .entries import temp_name
from .layout import UNDO_MODE, directory_make, project_dir
from .paths import is_temp_file, reported

_NAME = re.compile(r"^[0-9a-f]{64}$")
# The parts files are kept in (a part's module names itself here, so that the sweep of what
# crashes leave knows them all).
PARTS = ("images", "pdfs")
_LABELS = {"images": "the image", "pdfs": "the PDF"}  # what a failed write names
_FILE_MODE = 0o600
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC


def kept_write(*, project_id: int, part: str, data: bytes) -> str:
    """(Blocking) Keep `data` in the project's `part` and return its name (its SHA-256);
    DiskFull when it does not fit (nothing of it left behind)."""
    name = hashlib.sha256(data).hexdigest()
    directory = project_dir(project_id) / part
    with reported(_LABELS[part]):
        directory_make(directory.parent)
        directory_make(directory, UNDO_MODE)
        if (directory / name).is_file():
            # Kept again (the same file attached anew): now in use, whatever its age, for
            # the sweep of files no message refers to (`kept_unused`).
            os.utime(directory / name)
        else:
            temporary = directory / temp_name()
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
            fd = os.open(temporary, flags, _FILE_MODE)
            try:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(data)
                os.rename(temporary, directory / name)
            except BaseException:
                temporary.unlink(missing_ok=True)
                raise
    return name


def kept_read(*, project_id: int, part: str, sha256: str) -> bytes | None:
    """(Blocking) The bytes kept in `part` under that name; None for a name that is none or
    is not there."""
    if not isinstance(sha256, str) or not _NAME.match(sha256):
        return None
    try:
        fd = os.open(project_dir(project_id) / part / sha256, _READ)
    except FileNotFoundError:
        return None
    with os.fdopen(fd, "rb") as fh:
        return fh.read()


def kept_remove(*, project_id: int, part: str, sha256s: Iterable[str]) -> None:
    """(Blocking) Remove kept files of `part` by name."""
    directory: Path = project_dir(project_id) / part
    for name in sha256s:
        if isinstance(name, str) and _NAME.match(name):
            (directory / name).unlink(missing_ok=True)


def kept_partials(*, project_id: int, older_than: float) -> list[Path]:
    """The temporary files of kept writes cut off (a killed process) before `older_than`, a
    time: a young one may be being written now (kept writes take no lock)."""
    found = []
    for part in PARTS:
        try:
            with os.scandir(project_dir(project_id) / part) as scan:
                found += [
                    Path(entry.path)
                    for entry in scan
                    if is_temp_file(entry.name)
                    and entry.stat(follow_symlinks=False).st_mtime < older_than
                ]
        except FileNotFoundError:
            continue
    return sorted(found)


def kept_unused(*, project_id: int, part: str, used: set[str], older_than: float) -> list[Path]:
    """The files kept in `part` that no message refers to (`used`, by name), last kept before
    `older_than` (a time): an upload waits in the message box until it is sent, and one sent
    now is in `used` only once its message is stored."""
    try:
        with os.scandir(project_dir(project_id) / part) as scan:
            return sorted(
                Path(entry.path)
                for entry in scan
                if _NAME.match(entry.name)
                and entry.name not in used
                and entry.stat(follow_symlinks=False).st_mtime < older_than
            )
    except FileNotFoundError:
        return []
