"""A database trigger that refuses any UPDATE of an audit entry, made after each `migrate`.

The model and its queryset refuse changes already; the trigger holds for whatever reaches
the table another way (raw SQL, a shell, a future bug). It is made after each migrate, not
in a migration, because Django's SQLite schema editor alters a table by copying it, which
drops its triggers.
"""

from django.db.backends.base.base import BaseDatabaseWrapper

_TABLE = "roject_auditentry"
_MESSAGE = "audit entries are never changed"

_SQLITE = [
    f"CREATE TRIGGER IF NOT EXISTS {_TABLE}_no_update BEFORE UPDATE ON {_TABLE} "
    f"BEGIN SELECT RAISE(ABORT, '{_MESSAGE}'); END",
]
_POSTGRESQL = [
    f"CREATE OR REPLACE FUNCTION {_TABLE}_no_update() RETURNS trigger AS $$ "
    f"BEGIN RAISE EXCEPTION '{_MESSAGE}'; END $$ LANGUAGE plpgsql",
    f"DROP TRIGGER IF EXISTS {_TABLE}_no_update ON {_TABLE}",
    f"CREATE TRIGGER {_TABLE}_no_update BEFORE UPDATE ON {_TABLE} "
    f"FOR EACH ROW EXECUTE FUNCTION {_TABLE}_no_update()",
]


def audit_guard_install(connection: BaseDatabaseWrapper) -> None:
    """Make the trigger on this database if its table is there."""
    statements = {"sqlite": _SQLITE, "postgresql": _POSTGRESQL}.get(connection.vendor)
    if not statements or _TABLE not in connection.introspection.table_names():
        return
    with connection.cursor() as cursor:
        for statement in statements:
            cursor.execute(statement)


def audit_guard_after_migrate(sender, using, **kwargs) -> None:
    from django.db import connections

    audit_guard_install(connections[using])
