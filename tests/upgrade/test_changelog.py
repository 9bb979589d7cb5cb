"""The release rule: pyproject.toml's version is the changelog's newest section, and that
section names the last migration of each of the project's apps, so that a migration added
without its changelog line fails here (and the next release's upgrade test would start from
a wrong state)."""

import tomllib

import pytest
from django.db import migrations
from django.db.migrations.loader import MigrationLoader
from packaging.version import Version

from tests.upgrade.releases import ROOT, ChangelogError, own_apps, previous_release, releases


def migration_graph():
    """The migrations on disk (no database asked)."""
    return MigrationLoader(None, ignore_no_migrations=True).graph


def test_the_newest_section_names_each_apps_last_migration():
    """A new migration comes with its line: the newest section's 'Last migrations:' is where
    the migration graph ends, for every app of the project."""
    graph = migration_graph()
    newest = releases()[0]
    leaves = {app: sorted(n for a, n in graph.leaf_nodes(app) if a == app) for app in own_apps()}
    named = {app: [name] for app, name in newest.last_migrations.items()}
    assert named == leaves, (
        f"CHANGELOG.md's section {newest.version} must name each app's last migration: "
        "'Last migrations: `roject 00NN_name`, `rojos 00NN_name`' (after a release, in a new "
        "'## X.Y.Z (unreleased)' section on top: a released section never changes)"
    )


def test_pyproject_has_the_newest_sections_version():
    """Released, the version is the section's; unreleased, a development version of it."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    version, newest = Version(project["version"]), releases()[0]
    assert version.base_version == newest.version
    assert version.is_devrelease == (not newest.released)


def test_only_the_newest_section_may_be_unreleased():
    assert [release.released for release in releases()[1:]] == [True] * (len(releases()) - 1)
    assert previous_release() == releases()[1]


def test_every_released_state_is_still_in_the_migration_graph():
    """An install stands on its release's migrations: none is renamed or removed, and each
    release's state comes before the next one's."""
    graph = migration_graph()
    newer: set[tuple[str, str]] | None = None
    for release in releases():
        nodes = list(release.last_migrations.items())
        for node in nodes:
            assert node in graph.nodes, f"{release.version}: {node} is not a migration any more"
        plan = {step for node in nodes for step in graph.forwards_plan(node)}
        if newer is not None:
            assert plan <= newer, f"{release.version}'s state is not before the next release's"
        newer = plan


# Operations that leave an existing table's rows alone (or only make or drop a table or an
# index's name); any other, on SQLite most often a copy of the whole table, is named in the
# section of the release that brings it, where its upgrade notes say what it costs.
_CHEAP = (
    migrations.CreateModel,
    migrations.DeleteModel,
    migrations.AlterModelOptions,
    migrations.AlterModelManagers,
    migrations.RemoveIndex,
    migrations.RemoveConstraint,
)


def test_each_new_migration_that_touches_a_table_is_named_in_its_section():
    """A migration since the previous release that alters a table, adds an index or runs
    code is named in the newest section (the upgrade notes: which table, what it costs)."""
    loader = MigrationLoader(None, ignore_no_migrations=True)
    released = {
        step
        for node in previous_release().last_migrations.items()
        for step in loader.graph.forwards_plan(node)
    }
    own, newest = own_apps(), releases()[0]
    unnamed = [
        f"{app} {name}"
        for (app, name), migration in sorted(loader.disk_migrations.items())
        if app in own and (app, name) not in released
        if not all(isinstance(op, _CHEAP) for op in migration.operations)
        if name not in newest.text
    ]
    assert unnamed == [], f"CHANGELOG.md's section {newest.version} names none of these"


def test_a_section_without_its_migrations_is_an_error():
    with pytest.raises(ChangelogError, match=r"0\.3\.0: no 'Last migrations:' line"):
        releases("## 0.3.0 (unreleased)\n\n- Something new.\n")
    with pytest.raises(ChangelogError, match=r"'rojos' is not 'app 0000_name'"):
        releases("## 0.3.0\n\nLast migrations: `roject 0009_audit`, rojos\n")
    parsed = releases("## 1.0.0 (unreleased)\n\nLast migrations: `rojos 0030_x`, `roject 0010_y`\n")
    assert parsed[0].last_migrations == {"rojos": "0030_x", "roject": "0010_y"}
    assert not parsed[0].released
