"""What to do about a database that cannot be used, in the words a command and the doctor
print: the migrations to run, the SQLite file DATABASE_URL really names, or the server to
reach. Asked after the error, so it may try the database again; it never raises."""

from pathlib import Path

from django.db import DatabaseError, ProgrammingError, connection
from django.db.migrations.executor import MigrationExecutor
from django.utils.translation import ngettext

SERVER_FIX = "check DATABASE_URL, and that the database server runs and can be reached."


def database_fix(exc: DatabaseError) -> str | None:
    """The fix for `exc`, the error the default database just gave, from what it is and holds;
    None for a ProgrammingError of a migrated database (a bug, not the operator's to fix).

    Only a local SQLite file, or a server that answered (ProgrammingError: a table missing),
    is asked for its migrations: a server out of reach would be waited for a second time."""
    sqlite = connection.vendor == "sqlite"
    pending = migrations_pending() if sqlite or isinstance(exc, ProgrammingError) else 0
    if pending:
        which = f" (the SQLite file {_absolute(connection.settings_dict['NAME'])!r})"
        return (
            f"this database{which if sqlite else ''} lacks {pending} "
            f"{ngettext('migration', 'migrations', pending)}: run "
            "manage.py migrate."
        )
    if isinstance(exc, ProgrammingError):
        return None
    return sqlite_fix(connection.settings_dict["NAME"]) if sqlite else SERVER_FIX


def migrations_pending() -> int:
    """How many migrations the database lacks; 0 when it cannot tell (it does not answer)."""
    try:
        executor = MigrationExecutor(connection)
        return len(executor.migration_plan(executor.loader.graph.leaf_nodes()))
    except DatabaseError:
        return 0
    finally:
        connection.close()


def sqlite_fix(name: str | Path) -> str:
    """A SQLite file that cannot be opened: where DATABASE_URL put it, and why it may not be
    there (a path after sqlite:/// is relative: the newcomer's sqlite:///data/db.sqlite3)."""
    path = Path(_absolute(name))
    if not path.parent.is_dir():
        return (
            f"DATABASE_URL names the SQLite file {str(path)!r}, whose directory does not "
            "exist: a path after sqlite:/// is relative to the working directory, and an "
            "absolute one takes four slashes (sqlite:////data/rojo.sqlite3)."
        )
    return f"check that this user may read and write {str(path)!r} and its directory."


def _absolute(name: str | Path) -> str:
    return str(Path(name).absolute())
