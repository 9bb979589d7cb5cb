"""Conversation branches (edit, regenerate) and full-text search of titles and messages.

Search: SQLite gets FTS5 tables kept in sync by triggers; PostgreSQL a stored generated
`search_vector` column (to_tsvector('simple', ...)) with a GIN index on each table, which the
models do not declare: only rojos/search.py reads them. Only user and assistant
texts are indexed (tool results are file contents). On SQLite, a later migration that remakes
rojos_message or rojos_conversation (an altered column) drops the triggers with the old table:
rojos/search_triggers.py makes them again after each migrate (tests/conversations/test_search.py notices).
"""

from django.conf import settings
from django.db import migrations, models


_TEXT = "role IN ('user', 'assistant') AND {row}.content IS NOT NULL"


def _sqlite_table(fts, table, column, where_new, where_old):
    """An FTS5 index of one column of `table`, by rowid, and the triggers that keep it."""
    return [
        f"CREATE VIRTUAL TABLE {fts} USING fts5({column}, content='{table}', "
        # Prefix indexes: the last word of a query is a prefix (search as you type).
        f"content_rowid='id', tokenize='unicode61 remove_diacritics 2', prefix='2 3 4')",
        f"CREATE TRIGGER {fts}_insert AFTER INSERT ON {table} WHEN {where_new} BEGIN "
        f"INSERT INTO {fts}(rowid, {column}) VALUES (new.id, new.{column}); END",
        f"CREATE TRIGGER {fts}_delete AFTER DELETE ON {table} WHEN {where_old} BEGIN "
        f"INSERT INTO {fts}({fts}, rowid, {column}) VALUES ('delete', old.id, old.{column}); END",
        f"CREATE TRIGGER {fts}_update AFTER UPDATE OF {column} ON {table} BEGIN "
        f"INSERT INTO {fts}({fts}, rowid, {column}) "
        f"SELECT 'delete', old.id, old.{column} WHERE {where_old}; "
        f"INSERT INTO {fts}(rowid, {column}) SELECT new.id, new.{column} WHERE {where_new}; END",
        f"INSERT INTO {fts}(rowid, {column}) SELECT id, {column} FROM {table} "
        f"WHERE {where_new.replace('new.', '')}",
    ]


SEARCH_SQL = {
    "sqlite": [
        *_sqlite_table(
            "rojos_message_fts",
            "rojos_message",
            "content",
            "new." + _TEXT.format(row="new"),
            "old." + _TEXT.format(row="old"),
        ),
        *_sqlite_table(
            "rojos_conversation_fts", "rojos_conversation", "title", "new.title != ''", "old.title != ''"
        ),
    ],
    "postgresql": [
        # Stored vectors: a match is checked against the row's vector, never recomputed.
        "ALTER TABLE rojos_message ADD COLUMN search_vector tsvector GENERATED ALWAYS AS "
        # A tsvector holds at most 1 MB: a message's first 100,000 characters are indexed.
        "(CASE WHEN role IN ('user', 'assistant') THEN to_tsvector('simple', "
        "left(coalesce(content, ''), 100000)) END) STORED",
        "CREATE INDEX rojos_message_search ON rojos_message USING GIN (search_vector)",
        "ALTER TABLE rojos_conversation ADD COLUMN search_vector tsvector GENERATED ALWAYS AS "
        "(to_tsvector('simple', title)) STORED",
        "CREATE INDEX rojos_conversation_search ON rojos_conversation "
        "USING GIN (search_vector)",
    ],
}
UNSEARCH_SQL = {
    "sqlite": [
        f"DROP {kind} IF EXISTS {name}"
        for fts in ("rojos_message_fts", "rojos_conversation_fts")
        for kind, name in (
            ("TRIGGER", f"{fts}_insert"),
            ("TRIGGER", f"{fts}_delete"),
            ("TRIGGER", f"{fts}_update"),
            ("TABLE", fts),
        )
    ],
    "postgresql": [
        "ALTER TABLE rojos_message DROP COLUMN IF EXISTS search_vector",
        "ALTER TABLE rojos_conversation DROP COLUMN IF EXISTS search_vector",
    ],
}


def _run(statements):
    def run(apps, schema_editor):
        for sql in statements.get(schema_editor.connection.vendor, ()):
            schema_editor.execute(sql, params=None)

    return run


class Migration(migrations.Migration):

    dependencies = [
        ('roject', '0001_initial'),
        ('rojos', '0014_conversation_allowed_tools'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AlterModelOptions(
            name='conversation',
            options={'ordering': ['-pinned', '-updated', '-id']},
        ),
        migrations.RemoveConstraint(
            model_name='message',
            name='unique_message_position',
        ),
        migrations.RemoveIndex(
            model_name='conversation',
            name='rojos_conve_project_44f6b0_idx',
        ),
        migrations.AddField(
            model_name='conversation',
            name='pinned',
            field=models.BooleanField(default=False),
        ),
        migrations.AddField(
            model_name='conversation',
            name='branch',
            field=models.PositiveIntegerField(default=0, editable=False),
        ),
        migrations.AddField(
            model_name='conversation',
            name='branches',
            field=models.JSONField(blank=True, default=list, editable=False),
        ),
        migrations.AddField(
            model_name='message',
            name='branch',
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AddIndex(
            model_name='conversation',
            index=models.Index(fields=['project', '-pinned', '-updated', '-id'], name='conversation_page'),
        ),
        migrations.AddConstraint(
            model_name='message',
            constraint=models.UniqueConstraint(fields=('conversation', 'branch', 'position'), name='unique_message_position'),
        ),
        migrations.RunPython(_run(SEARCH_SQL), _run(UNSEARCH_SQL)),
    ]
