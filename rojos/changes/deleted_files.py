"""Recently deleted files: the way back for a path that left the tree.

A file's history opens from the tree, so a deleted file's history cannot be reached there.
This lists the project's recorded deletions whose path is still absent (the newest one per
path), and restores one by undoing its change through the undo ledger, which puts back the
copy kept before the deletion and refuses when the path exists again.
"""

import asyncio

from roject.audit.log import AuditActor
from roject.storage import StorageError, entry_exists, project_root_create
from rojos.changes.file_history import HISTORY_SCAN
from rojos.changes.undo import UndoRefused, change_undo
from rojos.models import FileChange

DELETING_TOOL = "delete_path"


def _deletions(project_id: int):
    return (
        FileChange.objects.filter(
            project_id=project_id, tool=DELETING_TOOL, after__isnull=False, undone__isnull=True
        )
        .select_related("author", "conversation__user")
        .order_by("-created", "-pk")[:HISTORY_SCAN]
    )


def _absent(root, path: str) -> bool:
    """Nothing at `path` now; a path the gate no longer allows (a parent became a link, say)
    counts as taken: its deletion cannot be undone there."""
    try:
        return not entry_exists(root, path)
    except StorageError:
        return False


def deleted_files_list(*, project_id: int, limit: int = 100) -> list[dict]:
    """(Blocking) The project's deletions whose paths are all still absent, newest first;
    a path deleted twice shows once, with its newest deletion (the one an undo may restore)."""
    root = project_root_create(project_id)
    seen: set[str] = set()
    found = []
    for change in _deletions(project_id):
        paths = list(change.paths)
        if seen.intersection(paths):
            continue
        seen.update(paths)
        if not all(_absent(root, path) for path in paths):
            continue
        author = change.made_by
        found.append(
            {
                "change": change.pk,
                "paths": paths,
                "origin": change.origin,
                "author": author.get_username() if author else None,
                "created": change.created,
                "conversation": change.conversation_id,
            }
        )
        if len(found) >= limit:
            break
    return found


async def deleted_file_restore(
    *, change: FileChange, user, actor: AuditActor | None = None
) -> FileChange:
    """Put a deleted path back as it was before `change` deleted it, by undoing the change;
    UndoRefused when it is no deletion or the path exists again (nothing is overwritten)."""
    if change.tool != DELETING_TOOL:
        raise UndoRefused("that change deleted nothing; open the file's history instead")
    root = project_root_create(change.project_id)
    for path in change.paths:
        if await asyncio.to_thread(entry_exists, root, path):
            raise UndoRefused(f"{path!r} exists again; restore refused so that it is not lost")
    return await change_undo(change=change, user=user, actor=actor)
