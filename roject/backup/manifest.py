"""What an archive says of itself: its header (first member) and its manifest (last member).

The header names the format, the Rojo that wrote it, the database it came from and the
migrations applied there; it comes first so that an archive from a newer Rojo is refused
before anything else is read. The manifest repeats the header and adds what the archive
holds: each database member with its rows and SHA-256, each project's storage with its
counts and one SHA-256 over its entries (names, kinds, modes, times, bytes), and each
table's id sequence, with one SHA-256 over them all. One digest per
project, not per file, keeps the manifest's size (and a check's memory) flat whatever the
number of files, and still names the project whose storage differs.
"""

import hashlib
import importlib.metadata
import re
import tomllib
from dataclasses import dataclass, field

import orjson
from django.conf import settings
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.migrations.loader import MigrationLoader
from django.db.migrations.recorder import MigrationRecorder
from django.utils import timezone
from django.utils.translation import ngettext

from .errors import BackupError

FORMAT = "rojo-backup"
FORMAT_VERSION = 1
HEADER_NAME = "rojo-backup/header.json"
MANIFEST_NAME = "rojo-backup/manifest.json"


def rojo_version() -> str:
    """This Rojo's version: its pyproject.toml's, beside the code (the image copies it there,
    as it installs no package of Rojo's), else the installed package's."""
    try:
        with (settings.BASE_DIR / "pyproject.toml").open("rb") as handle:
            return tomllib.load(handle)["project"]["version"]
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        pass
    try:
        return importlib.metadata.version("rojo-chat")
    except importlib.metadata.PackageNotFoundError:
        return "0"


def _version_key(version: str) -> tuple[int, ...]:
    """The leading numbers of a version ("0.10.2rc1" → (0, 10, 2)), for ordering."""
    numbers = re.findall(r"\d+", version.split("+")[0].split("-")[0])
    return tuple(int(n) for n in numbers[:3]) or (0,)


def applied_migrations(connection: BaseDatabaseWrapper) -> list[str]:
    """The migrations applied to the database, as "app.name", sorted."""
    applied = MigrationRecorder(connection).applied_migrations()
    return sorted(f"{app}.{name}" for app, name in applied)


def header_make(connection: BaseDatabaseWrapper, *, storage: str, projects: list[int]) -> dict:
    """The header of an archive of this installation now."""
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "rojo_version": rojo_version(),
        "created": timezone.now().isoformat(),
        "vendor": connection.vendor,
        "migrations": applied_migrations(connection),
        "storage": storage,  # "all", "some" (the projects listed) or "none"
        "projects": projects,
    }


def newer_refusal(header: dict, connection: BaseDatabaseWrapper) -> str | None:
    """Why this Rojo cannot read the archive (it comes from a newer one), or None."""
    if header.get("format") != FORMAT:
        return "this is no Rojo backup (its header names no rojo-backup format)"
    theirs = str(header.get("rojo_version", "?"))
    newer = (
        f"the archive was made by Rojo {theirs}, newer than this one ({rojo_version()}); "
        f"upgrade this installation to {theirs} or later, then restore"
    )
    if (
        not isinstance(header.get("format_version"), int)
        or header["format_version"] > FORMAT_VERSION
    ):
        return newer + f" (archive format {header.get('format_version')!r})"
    if _version_key(theirs) > _version_key(rojo_version()):
        return newer
    known = {f"{app}.{name}" for app, name in MigrationLoader(None).disk_migrations}
    unknown = sorted(set(header.get("migrations", [])) - known)
    if unknown:
        return newer + f" (its migrations {', '.join(unknown[:5])} are unknown here)"
    return None


def schema_refusal(header: dict, connection: BaseDatabaseWrapper) -> str | None:
    """Why the database cannot take the archive's rows as they are, or None: its applied
    migrations must be the archive's."""
    ours = set(applied_migrations(connection))
    theirs = set(header.get("migrations", []))
    if ours == theirs:
        return None
    missing = sorted(theirs - ours)
    if missing:
        return (
            "this database lacks migrations the archive's had "
            f"({', '.join(missing[:5])}): run `manage.py migrate`, then restore"
        )
    extra = sorted(ours - theirs)
    return (
        f"the archive comes from an older schema (Rojo {header.get('rojo_version')}; it lacks "
        f"{', '.join(extra[:5])}): restore it with the Rojo version that made it, then "
        "upgrade that installation"
    )


@dataclass(kw_only=True)
class Manifest:
    """What an archive holds, as its writer counted it."""

    header: dict
    header_sha256: str = ""
    tables: list[dict] = field(default_factory=list)  # member, model, table, rows, sha256, bytes
    sequences: dict[str, int] = field(default_factory=dict)  # model → highest id handed out
    # The sequences' digest as the manifest says it (sequences_digest() when written).
    sequences_sha256: str = ""
    projects: dict[str, dict] = field(default_factory=dict)  # id → counts and sha256

    def as_json(self) -> dict:
        return {
            "header": self.header,
            "header_sha256": self.header_sha256,
            "tables": self.tables,
            "sequences": self.sequences,
            "sequences_sha256": self.sequences_digest(),
            "projects": self.projects,
        }

    @classmethod
    def from_json(cls, data: dict) -> "Manifest":
        try:
            sequences = dict(data["sequences"])
            if not all(type(high) is int and high >= 0 for high in sequences.values()):
                raise ValueError("an id sequence that is no count")
            return cls(
                header=dict(data["header"]),
                header_sha256=str(data["header_sha256"]),
                tables=list(data["tables"]),
                sequences=sequences,
                sequences_sha256=str(data["sequences_sha256"]),
                projects=dict(data["projects"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise BackupError(f"the archive's manifest is malformed ({exc!r})") from exc

    def sequences_digest(self) -> str:
        """The SHA-256 of the id sequences: the rows, the storage and the header have theirs
        in their own members, the sequences only in the manifest, so they carry their own."""
        data = orjson.dumps(self.sequences, option=orjson.OPT_SORT_KEYS)
        return hashlib.sha256(data).hexdigest()

    def project_ids(self) -> set[int]:
        """The projects whose storage the archive carries (maybe empty)."""
        return {int(pid) for pid in self.projects}

    def rows(self) -> int:
        return sum(int(table["rows"]) for table in self.tables)

    def summary(self) -> str:
        """One line of what the archive holds, for the commands' output."""
        files = sum(p["files"] for p in self.projects.values())
        size = sum(p["bytes"] for p in self.projects.values())
        rows, parts, projects = self.rows(), len(self.tables), len(self.projects)
        return (
            f"Rojo {self.header['rojo_version']} on {self.header['vendor']}, "
            f"{self.header['created']}: {rows} {ngettext('row', 'rows', rows)} in {parts} "
            f"{ngettext('part', 'parts', parts)}; storage {self.header['storage']}: "
            f"{projects} {ngettext('project', 'projects', projects)}, "
            f"{files} {ngettext('file', 'files', files)}, {size} {ngettext('byte', 'bytes', size)}"
        )
