"""Tool results too large to hand the model whole, kept beside the project's root.

ROJO_STORAGE_DIR/<project_id>/results/<conversation_id>/<handle> holds one result's text
(UTF-8), outside the root: no tool that works on the project's files reaches it. The
handle is unguessable (128 random bits), and it is looked up only under the directory of
the conversation asking, so a conversation reads only its own results; who may read the
conversation is checked by its callers. Directories are 0700 and files 0600; a result is
written under a temporary name and renamed, so a reader never sees half of one. They go
with their conversation (`results_remove`), and the storage sweep removes those older than
ROJO_KEPT_RESULT_DAYS (`results_old`), which a deleted conversation's crash may have left.
A backup takes them with the project's storage (`backups.PARTS`).
"""

import os
import re
import secrets
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from .entries import temp_name
from .layout import UNDO_MODE, directory_make, project_dir
from .paths import TEMP_PREFIX, StorageError, reported

_HANDLE = re.compile(r"^r[0-9a-f]{32}$")
_FILE_MODE = 0o600
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
_BLOCK = 1 << 20


@dataclass(frozen=True, slots=True, kw_only=True)
class ResultPart:
    """Bytes `start`..`end` of a kept result of `size` bytes, as text."""

    text: str
    start: int
    end: int
    size: int


def _results_dir(project_id: int, conversation_id: int) -> Path:
    return project_dir(project_id) / "results" / str(int(conversation_id))


def result_keep(*, project_id: int, conversation_id: int, text: str) -> str:
    """Keep `text` for the conversation and return its handle; DiskFull when it does not
    fit (nothing of it left behind), StorageError for another failure of the storage."""
    directory = _results_dir(project_id, conversation_id)
    with reported("the tool's result"):
        directory_make(directory.parent.parent)
        directory_make(directory.parent, UNDO_MODE)
        directory_make(directory, UNDO_MODE)
        handle = "r" + secrets.token_hex(16)
        temporary = directory / temp_name()
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, _FILE_MODE)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(text.encode("utf-8"))
            os.rename(temporary, directory / handle)
        except BaseException:
            temporary.unlink(missing_ok=True)
            raise
    return handle


def result_read(
    *, project_id: int, conversation_id: int, handle: str, offset: int, length: int
) -> ResultPart:
    """Up to `length` bytes of a kept result from byte `offset`, cut to whole characters.

    StorageError for a handle this conversation does not hold, or an offset past the end.
    """
    if offset < 0 or length < 1:
        raise StorageError("offset must be 0 or more, and length at least 1")
    with os.fdopen(_opened(project_id, conversation_id, handle), "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if offset >= size:
            raise StorageError(f"offset {offset:,} is past the end: the result is {size:,} bytes")
        fh.seek(offset)
        raw = fh.read(length)
    # A range may start or end inside a character: its stray bytes are left out.
    skipped = 0
    while skipped < len(raw) and raw[skipped] & 0xC0 == 0x80:
        skipped += 1
    text = raw[skipped:].decode("utf-8", "ignore")
    start = offset + skipped
    return ResultPart(text=text, start=start, end=start + len(text.encode("utf-8")), size=size)


def result_download_open(
    *, project_id: int, conversation_id: int, handle: str
) -> Callable[[Callable[[bytes], None]], None]:
    """(Blocking) Open a kept result for a download, and return what streams it (giving each
    block to `emit`, then closing it). StorageError, before any response starts, for a
    handle the conversation does not hold."""
    fh = os.fdopen(_opened(project_id, conversation_id, handle), "rb")

    def stream(emit: Callable[[bytes], None]) -> None:
        with fh:
            for block in iter(lambda: fh.read(_BLOCK), b""):
                emit(block)

    return stream


def _opened(project_id: int, conversation_id: int, handle: str) -> int:
    """A descriptor of the kept result; StorageError when the conversation holds none."""
    if not isinstance(handle, str) or not _HANDLE.match(handle):
        raise StorageError(f"no kept result {handle!r} in this conversation")
    try:
        return os.open(_results_dir(project_id, conversation_id) / handle, _READ)
    except FileNotFoundError:
        raise StorageError(f"no kept result {handle!r} in this conversation") from None


def results_kept(*, project_id: int, conversation_id: int) -> bool:
    """Whether any result is kept for the conversation."""
    try:
        with os.scandir(_results_dir(project_id, conversation_id)) as scan:
            return any(not entry.name.startswith(TEMP_PREFIX) for entry in scan)
    except FileNotFoundError:
        return False


def results_remove(*, project_id: int, conversation_id: int) -> None:
    """Remove every result kept for a conversation (the conversation was deleted)."""
    shutil.rmtree(_results_dir(project_id, conversation_id), ignore_errors=True)


def results_old(project_id: int) -> list[Path]:
    """Kept results (and temporary files a crash left) older than ROJO_KEPT_RESULT_DAYS; a
    conversation's whole directory when nothing in it is newer."""
    days = settings.ROJO_KEPT_RESULT_DAYS
    results = project_dir(project_id) / "results"
    if not days or not results.is_dir():
        return []
    old = time.time() - days * 86400
    found = []
    with os.scandir(results) as conversations:
        for conversation in conversations:
            if not conversation.is_dir(follow_symlinks=False):
                continue
            with os.scandir(conversation.path) as scan:
                entries = [(e, e.stat(follow_symlinks=False).st_mtime < old) for e in scan]
            if all(is_old for _, is_old in entries):
                found.append(Path(conversation.path))
            else:
                found.extend(Path(e.path) for e, is_old in entries if is_old)
    return sorted(found)
