"""The releases CHANGELOG.md names, read as data: each one's version and last migrations.

The changelog is the one place where a release's migration state is written down: the upgrade
test builds the previous release's database from it, and the rule test checks that its newest
section names the migrations the code has now.
"""

import re
from dataclasses import dataclass
from pathlib import Path

from django.apps import apps
from django.db.migrations.loader import MigrationLoader

ROOT = Path(__file__).resolve().parents[2]
CHANGELOG = ROOT / "CHANGELOG.md"

_HEADING = re.compile(r"^## (?P<version>\d+\.\d+\.\d+)(?P<rest>.*)$")
_LAST = re.compile(r"^Last migrations: (?P<names>.+)$")
_NAMED = re.compile(r"^`?(?P<app>[a-z_]+) (?P<name>\d{4}_\w+)`?$")


class ChangelogError(ValueError):
    """The changelog does not say what a release's migrations are, in the expected form."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Release:
    """One section of the changelog."""

    version: str
    released: bool
    # App label to the name of its last migration in this release.
    last_migrations: dict[str, str]
    text: str  # the section's lines after its heading, but the 'Last migrations:' one


def _last_migrations(line: str, version: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for item in line.rstrip(".").split(","):
        named = _NAMED.match(item.strip())
        if named is None:
            raise ChangelogError(
                f"{version}: {item.strip()!r} is not 'app 0000_name' in its 'Last migrations:' line"
            )
        found[named["app"]] = named["name"]
    return found


def releases(text: str | None = None) -> list[Release]:
    """The changelog's releases, newest first (`text`: the changelog's, else CHANGELOG.md's)."""
    lines = (CHANGELOG.read_text(encoding="utf-8") if text is None else text).splitlines()
    found: list[Release] = []
    version, released, last, body = None, False, None, []

    def close() -> None:
        if version is None:
            return
        if last is None:
            raise ChangelogError(f"{version}: no 'Last migrations:' line")
        text = "\n".join(body)
        found.append(Release(version=version, released=released, last_migrations=last, text=text))

    for line in lines:
        heading = _HEADING.match(line)
        if heading:
            close()
            version, last, body = heading["version"], None, []
            released = "unreleased" not in heading["rest"]
            continue
        named = _LAST.match(line)
        if named and version is not None:
            last = _last_migrations(named["names"], version)
        else:
            body.append(line)
    close()
    return found


def previous_release() -> Release:
    """The release an upgrade to this code starts from: the section after the code's own."""
    found = releases()
    if len(found) < 2:
        raise ChangelogError("CHANGELOG.md names no release before the code's own")
    return found[1]


def own_apps() -> set[str]:
    """The labels of the installed apps with migrations whose package is at the repository's
    top level (a virtual environment inside it holds others)."""
    migrated = MigrationLoader(None, ignore_no_migrations=True).migrated_apps
    return {
        config.label
        for config in apps.get_app_configs()
        if config.label in migrated and Path(config.path).parent == ROOT
    }
