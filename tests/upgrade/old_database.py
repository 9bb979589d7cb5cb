"""A database of a test's own, and migrating it the way a release's `migrate` did.

The worker's test database stays as it is: the default connection is pointed at a new one (a
SQLite file, or a PostgreSQL database beside the worker's) for the block, so that today's
code, which uses the default connection, reads the upgraded install as it would in production.

Django's MigrationExecutor is used directly, not django-test-migrations: its Migrator works on
the worker's test database, dropping only the tables of Django's models before migrating it
from empty (the FTS5 tables and triggers of migration 0015 outlive that, and 0015 then fails
to make them again), and it mutes pre_migrate and post_migrate, whose handlers an upgrade
must run (the search triggers made again after a SQLite table copy, the audit log's guard).
"""

import contextlib
from pathlib import Path

from django.contrib.contenttypes.models import ContentType
from django.core.management.sql import emit_post_migrate_signal, emit_pre_migrate_signal
from django.db import connection, connections
from django.db.migrations.executor import MigrationExecutor

from tests.upgrade.releases import Release, own_apps


def _reconnect(name: str) -> None:
    """Point the default connection (and the new connections of every thread) at `name`."""
    default = connections["default"]
    default.close()
    if default.vendor == "postgresql":
        default.close_pool()  # its connections were made for the other database
    default.settings_dict["NAME"] = name
    ContentType.objects.clear_cache()  # ids of the other database


@contextlib.contextmanager
def database_of_its_own(directory: Path):
    """The default connection on a new, empty database for the block; the worker's test
    database is left as it was, and the new one dropped after."""
    default = connections["default"]
    saved = default.settings_dict["NAME"]
    postgresql = default.vendor == "postgresql"
    name = f"{saved}_upgrade" if postgresql else str(directory / "upgrade.sqlite3")
    if postgresql:
        with default._nodb_cursor() as cursor:
            cursor.execute(f'DROP DATABASE IF EXISTS "{name}"')
            cursor.execute(f'CREATE DATABASE "{name}" TEMPLATE template0')
    _reconnect(name)
    try:
        yield
    finally:
        _reconnect(saved)
        if postgresql:
            with default._nodb_cursor() as cursor:
                cursor.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def migrate_to(release: Release):
    """Migrate the empty database to `release`'s last migrations (the project's apps it does
    not name did not exist then; every other app goes to its last), as `migrate` does, with
    its signals: content types, the audit guard, the search triggers (today's handlers, which
    look at the schema they find). The migration state's apps, as the release had them."""
    executor = MigrationExecutor(connection)
    graph, own = executor.loader.graph, own_apps()
    targets = [(app, release.last_migrations[app]) for app in own if app in release.last_migrations]
    targets += [node for node in graph.leaf_nodes() if node[0] not in own]
    plan = executor.migration_plan(targets)
    state = executor._create_project_state(with_applied_migrations=True)
    emit_pre_migrate_signal(0, False, connection.alias, apps=state.apps, plan=plan)
    state = executor.migrate(targets, plan=plan, state=state.clone())
    state.clear_delayed_apps_cache()
    emit_post_migrate_signal(0, False, connection.alias, apps=state.apps, plan=plan)
    return state.apps


def rows_of(apps) -> dict[str, dict]:
    """Every row of every table of the state's models: {model label: {pk: {column: value}}}."""
    found = {}
    for model in apps.get_models(include_auto_created=True):
        if model._meta.proxy or not model._meta.managed:
            continue
        pk = model._meta.pk.attname
        found[model._meta.label_lower] = {row[pk]: row for row in model._base_manager.values()}
    return found
