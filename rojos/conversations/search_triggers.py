"""SQLite's full-text triggers, made again when a migration dropped them.

The FTS5 indexes of titles and messages (migration 0015) are kept by triggers on their
tables. Django's SQLite schema editor alters a table by making a new one and copying the
rows, and the triggers go with the old table: search would then silently stop following
new titles and messages. After each `migrate`, any missing trigger is made again. The
copied rows keep their ids and text, so the index itself stays true.
"""

from django.db.backends.base.base import BaseDatabaseWrapper

_TEXT = "{row}.role IN ('user', 'assistant') AND {row}.content IS NOT NULL"
# A draft (a reply still streaming, migration 0020) is indexed once whatever ends it clears
# the marker: until then each save would re-index the whole growing text.
_FINISHED = _TEXT + " AND NOT {row}.draft"


def _indexes(*, drafts_marked: bool) -> list[tuple[str, str, str, str, str, str]]:
    """(index, table, column, the columns whose update re-indexes, which new rows it holds,
    which old rows it held), as the migrations applied so far left them."""
    text, updated = (_FINISHED, "content, draft") if drafts_marked else (_TEXT, "content")
    return [
        (
            "rojos_message_fts",
            "rojos_message",
            "content",
            updated,
            text.format(row="new"),
            text.format(row="old"),
        ),
        (
            "rojos_conversation_fts",
            "rojos_conversation",
            "title",
            "title",
            "new.title != ''",
            "old.title != ''",
        ),
    ]


def _triggers(fts: str, table: str, column: str, updated: str, new: str, old: str) -> list[str]:
    return [
        f"CREATE TRIGGER IF NOT EXISTS {fts}_insert AFTER INSERT ON {table} WHEN {new} BEGIN "
        f"INSERT INTO {fts}(rowid, {column}) VALUES (new.id, new.{column}); END",
        f"CREATE TRIGGER IF NOT EXISTS {fts}_delete AFTER DELETE ON {table} WHEN {old} BEGIN "
        f"INSERT INTO {fts}({fts}, rowid, {column}) VALUES ('delete', old.id, old.{column}); END",
        f"CREATE TRIGGER IF NOT EXISTS {fts}_update AFTER UPDATE OF {updated} ON {table} BEGIN "
        f"INSERT INTO {fts}({fts}, rowid, {column}) "
        f"SELECT 'delete', old.id, old.{column} WHERE {old}; "
        f"INSERT INTO {fts}(rowid, {column}) SELECT new.id, new.{column} WHERE {new}; END",
    ]


def search_triggers_restore(connection: BaseDatabaseWrapper) -> None:
    """Make again the triggers of each FTS5 index that exists (SQLite only)."""
    if connection.vendor != "sqlite":
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        tables = {name for (name,) in cursor.fetchall()}
        # A trigger naming a column the table lacks (migrated back before 0020) would be
        # made, then fail every insert.
        cursor.execute("SELECT name FROM pragma_table_info('rojos_message')")
        drafts_marked = "draft" in {name for (name,) in cursor.fetchall()}
        for index in _indexes(drafts_marked=drafts_marked):
            if index[0] in tables:
                for statement in _triggers(*index):
                    cursor.execute(statement)
