import os
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from roject.backup import ArchiveExists, BackupError, backup_write


class Command(BaseCommand):
    help = (
        "Write the installation to one archive FILE (a tar; .gz compresses it): the "
        "database as portable rows and every project's files and undo copies. Safe while "
        "the app runs: file changes wait while the storage is copied. An existing FILE is "
        "refused unless --overwrite. docs/operations.md, 'Backups'."
    )

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path, help="Where to write the archive.")
        parser.add_argument(
            "--overwrite",
            action="store_true",
            help="Replace FILE if it exists (by default an existing FILE is refused, untouched).",
        )
        scope = parser.add_mutually_exclusive_group()
        scope.add_argument(
            "--database-only", action="store_true", help="Leave every project's storage out."
        )
        scope.add_argument(
            "--project",
            type=int,
            action="append",
            metavar="ID",
            help="Hold only this project's storage (repeatable); the database is whole.",
        )

    def handle(self, *args, file, overwrite, database_only, project, **options):
        if file.is_dir():
            raise CommandError(f"backup failed: {str(file)!r} is a directory; name the archive, "
                               f"such as {str(file / 'rojo.tar.gz')!r}")  # fmt: skip
        if not file.parent.is_dir():
            raise CommandError(f"backup failed: no directory {str(file.parent)!r} to write into")
        if os.path.lexists(file) and not overwrite:  # before the work, as backup_write would after
            raise CommandError(_exists(file))
        storage = "none" if database_only else (sorted(set(project)) if project else "all")
        try:
            manifest = backup_write(path=file, storage=storage, overwrite=overwrite)
        except ArchiveExists as exc:  # made there while the backup ran
            raise CommandError(_exists(file)) from exc
        except (BackupError, OSError) as exc:
            raise CommandError(f"backup failed: {exc}") from exc
        self.stdout.write(f"{file}: {manifest.summary()}")


def _exists(file: Path) -> str:
    """The refusal of a FILE that exists: an older backup is not lost to a repeated name."""
    return (
        f"backup refused: {str(file)!r} exists already (an older backup?) and was left as it "
        "is; name another file, or give --overwrite to replace it"
    )
