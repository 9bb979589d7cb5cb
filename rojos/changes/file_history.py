"""One history per file: every recorded change to a path, whoever made it.

The ledger (FileChange) keeps the paths of a change as a JSON list, which SQLite cannot
search inside: the project's newest changes are read (one query, on the project and time
index) and filtered here. HISTORY_SCAN bounds how far back a history reaches.
"""

from rojos.models import FileChange

HISTORY_SCAN = 2_000


def _recent(project_id: int):
    return (
        FileChange.objects.filter(project_id=project_id, after__isnull=False)
        .select_related("author", "conversation__user")
        .order_by("-created", "-pk")[:HISTORY_SCAN]
    )


def _touches(change: FileChange, path: str) -> bool:
    return any(p == path or path.startswith(p.rstrip("/") + "/") for p in change.paths)


def file_history(*, project_id: int, path: str, limit: int = 100) -> list[dict]:
    """(Blocking) The changes to `path` (or a folder holding it), newest first."""
    path = path.strip("/")
    found = []
    for change in _recent(project_id):
        if not _touches(change, path):
            continue
        number = change.paths.index(path) if path in change.paths else None
        author = change.made_by
        found.append(
            {
                "change": change.pk,
                "origin": change.origin,
                "tool": change.tool,
                "author": author.get_username() if author else None,
                "created": change.created,
                "paths": change.paths,
                "diff": change.diffs[number] if number is not None and change.diffs else "",
                "conversation": change.conversation_id,
                "undone": change.undone,
                # The version before this change, if its copy is kept (not undone).
                "restorable": number is not None and change.undone is None,
            }
        )
        if len(found) >= limit:
            break
    _versions_link(found, path)
    return found


def _versions_link(found: list[dict], path: str) -> None:
    """Give each change the change whose copy holds the version it left (`versionFrom`):
    the next newer one, which copied the file before it changed it; none for the newest,
    whose version is the file now."""
    newer = None
    for entry in found:
        exact = path in entry["paths"]
        entry["versionFrom"] = newer["change"] if newer and newer["restorable"] else None
        newer = entry if exact else None


def file_last_change(*, project_id: int, path: str) -> FileChange | None:
    """(Blocking) The newest recorded change to `path`, for saying who changed it when."""
    for change in _recent(project_id):
        if _touches(change, path):
            return change
    return None
