"""What an archive holds, read back for comparison: every table's rows, every file."""

import hashlib
from pathlib import Path

from roject.backup.reading import archive_read

RESTORED = "backup_restored"


def archive_contents(path: Path) -> tuple[dict, dict]:
    """({model: [row as {column: value}, ...]}, {(project, path): (kind, mode, size,
    link target, sha256 of the bytes)}). Times of entries are left out: a directory's
    changes as a restore fills it; and the audit entries of restores, which each restore
    adds (roject.backup.interrupted)."""
    tables: dict[str, list[dict]] = {}
    files: dict[tuple[int, str], tuple] = {}

    def on_rows(label, columns, rows):
        found = (dict(zip(columns, row, strict=True)) for row in rows)
        tables.setdefault(label, []).extend(
            row for row in found if row.get("action") != RESTORED or label != "roject.auditentry"
        )

    def on_entry(project, entry, content):
        data = hashlib.sha256(content.read()).hexdigest() if content is not None else None
        files[(project, entry.path)] = (entry.kind, entry.mode, entry.size, entry.target, data)

    with Path(path).open("rb") as source:
        archive_read(source, on_entry=on_entry, on_rows=on_rows)
    return tables, files
