"""A draft marker on messages: a reply saved while it streams is not indexed for search until
whatever ends it clears the marker.

Each draft save writes the whole text so far again. Indexed, every save re-tokenised all of it:
SQLite's update trigger deleted the row from the FTS5 index and inserted it again, PostgreSQL
recomputed the stored tsvector. Now a message is indexed iff it is a user's or an assistant's,
has text and is not a draft; the SQLite update trigger also follows the marker (a draft that
ends is inserted then), and PostgreSQL's generated column is dropped and made again with the
marker in its expression (PostgreSQL 15 cannot change a generation expression in place).

Existing rows are no drafts, so the index already holds exactly the rows the new rule indexes.
The operations are ordered for the way back too: SQLite cannot drop a column that a trigger
names, and a remade table loses its triggers.
"""

from django.db import migrations, models

_TEXT = "{row}.role IN ('user', 'assistant') AND {row}.content IS NOT NULL"
_FINISHED = _TEXT + " AND NOT {row}.draft"
_FTS = "rojos_message_fts"


def _sqlite_triggers(indexed: str, columns: str, create: str = "CREATE TRIGGER") -> list[str]:
    """The triggers that keep the messages' FTS5 index: rows are in it iff `indexed`."""
    new, old = indexed.format(row="new"), indexed.format(row="old")
    return [
        f"{create} {_FTS}_insert AFTER INSERT ON rojos_message WHEN {new} BEGIN "
        f"INSERT INTO {_FTS}(rowid, content) VALUES (new.id, new.content); END",
        f"{create} {_FTS}_delete AFTER DELETE ON rojos_message WHEN {old} BEGIN "
        f"INSERT INTO {_FTS}({_FTS}, rowid, content) VALUES ('delete', old.id, old.content); END",
        f"{create} {_FTS}_update AFTER UPDATE OF {columns} ON rojos_message BEGIN "
        f"INSERT INTO {_FTS}({_FTS}, rowid, content) "
        f"SELECT 'delete', old.id, old.content WHERE {old}; "
        f"INSERT INTO {_FTS}(rowid, content) SELECT new.id, new.content WHERE {new}; END",
    ]


_DROP_TRIGGERS = [f"DROP TRIGGER IF EXISTS {_FTS}_{kind}" for kind in ("insert", "delete", "update")]


def _pg_vector(condition: str) -> list[str]:
    return [
        "ALTER TABLE rojos_message DROP COLUMN IF EXISTS search_vector",
        "ALTER TABLE rojos_message ADD COLUMN search_vector tsvector GENERATED ALWAYS AS "
        # A tsvector holds at most 1 MB: a message's first 100,000 characters are indexed.
        f"(CASE WHEN {condition} THEN to_tsvector('simple', "
        "left(coalesce(content, ''), 100000)) END) STORED",
        "CREATE INDEX rojos_message_search ON rojos_message USING GIN (search_vector)",
    ]


SKIP_DRAFTS = {
    "sqlite": [*_DROP_TRIGGERS, *_sqlite_triggers(_FINISHED, "content, draft")],
    "postgresql": _pg_vector("role IN ('user', 'assistant') AND NOT draft"),
}
# The way back indexes every text message again: the drafts of a running or crashed turn
# are put in first (left out, the old triggers' later 'delete' of one would corrupt FTS5).
_DRAFTS_INDEXED = (
    f"INSERT INTO {_FTS}(rowid, content) SELECT id, content FROM rojos_message "
    f"WHERE {_TEXT.format(row='rojos_message')} AND draft"
)
INDEX_DRAFTS = {
    "sqlite": [_DRAFTS_INDEXED, *_DROP_TRIGGERS, *_sqlite_triggers(_TEXT, "content")],
    "postgresql": _pg_vector("role IN ('user', 'assistant')"),
}
# After the marker's column is gone (the table remade on SQLite): the triggers of before.
TRIGGERS_BACK = {"sqlite": _sqlite_triggers(_TEXT, "content", "CREATE TRIGGER IF NOT EXISTS")}


def _run(statements):
    def run(apps, schema_editor):
        for sql in statements.get(schema_editor.connection.vendor, ()):
            schema_editor.execute(sql, params=None)

    return run


class Migration(migrations.Migration):

    dependencies = [
        ("rojos", "0019_pending_approvals"),
    ]

    operations = [
        migrations.RunPython(migrations.RunPython.noop, _run(TRIGGERS_BACK)),
        migrations.AddField(
            model_name="message",
            name="draft",
            field=models.BooleanField(default=False),
        ),
        migrations.RunPython(_run(SKIP_DRAFTS), _run(INDEX_DRAFTS)),
    ]
