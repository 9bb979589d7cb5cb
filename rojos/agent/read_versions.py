"""No silent overwrites by rojos: a file read in a turn is not changed blind later in it.

The version (size, modification time, hash) of each file a rojo read is kept for the turn.
A later call of the same turn that writes, edits, moves or deletes that file is refused
with a tool error when the file changed since the read (a person saved it, an upload
replaced it): the model is told who changed it and when, from the change ledger, and to
read it again. A file the rojo never read is written as before. No query is made unless a
call is refused; checks run under the project's change lock, so nothing lands in between.
"""

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path, PurePosixPath

from django.utils import timezone

from roject import storage
from roject.storage import StorageError
from rojos.changes.file_history import file_last_change

# The tools whose results show a file's content, and where its path is.
READ_TOOLS = {"get_text_content", "search_text"}


def read_paths(name: str, args: dict | None, result) -> list[str]:
    """The files a successful read call showed the model."""
    if name == "get_text_content" and args:
        return [args["path"]]
    if name == "search_text" and isinstance(result, dict):
        return sorted({m["path"] for m in result.get("matches", []) if "path" in m})
    return []


def _touches(changed: str, read: str) -> bool:
    return read == changed or read.startswith(changed.rstrip("/") + "/")


@dataclass
class ReadVersions:
    """The versions of the files one turn read, by their path in the root."""

    project_id: int
    root: Path
    seen: dict[str, tuple[dict, datetime]] = field(default_factory=dict)

    def _key(self, path: str) -> str:
        try:
            return str(storage.resolved_relative(self.root, path))
        except (StorageError, OSError):
            return str(PurePosixPath(path.strip("/")))

    def remember(self, paths: list[str]) -> None:
        """(Blocking) Keep the version of each file as it is after the read."""
        for path in paths:
            version = storage.file_version(self.root, path)
            if version is not None:
                self.seen[self._key(path)] = (version, timezone.now())

    def _touched(self, paths: list[str]) -> list[str]:
        keys = [self._key(p) for p in paths]
        return [read for read in self.seen if any(_touches(k, read) for k in keys)]

    def stale(self, paths: list[str]) -> str | None:
        """(Blocking) Why a change of `paths` must not run, if a file read changed since."""
        for read in self._touched(paths):
            version, when = self.seen[read]
            if not storage.same_version(storage.file_version(self.root, read), version):
                by = self._by(read, when)
                return f"{read} changed since you read it{by}; read it again before writing"
        return None

    def _by(self, path: str, read_at: datetime) -> str:
        change = file_last_change(project_id=self.project_id, path=path)
        if change is None or change.created < read_at:
            return ""
        author = change.made_by
        who = author.get_username() if author else "someone"
        return f" (by {who}, {timezone.localtime(change.created):%H:%M})"

    def refresh(self, paths: list[str]) -> None:
        """(Blocking) After the turn's own change: what it left is what it knows now."""
        for read in self._touched(paths):
            version = storage.file_version(self.root, read)
            if version is None:
                del self.seen[read]
            else:
                self.seen[read] = (version, timezone.now())
