from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from roject.backup import BackupError, backup_write


class Command(BaseCommand):
    help = (
        "Write the installation to one archive FILE (a tar; .gz compresses it): the "
        "database as portable rows and every project's files and undo copies. Safe while "
        "the app runs: file changes wait while the storage is copied. docs/operations.md, "
        "'Backups'."
    )

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path, help="Where to write the archive.")
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

    def handle(self, *args, file, database_only, project, **options):
        if file.is_dir():
            raise CommandError(f"backup failed: {str(file)!r} is a directory; name the archive, "
                               f"such as {str(file / 'rojo.tar.gz')!r}")  # fmt: skip
        if not file.parent.is_dir():
            raise CommandError(f"backup failed: no directory {str(file.parent)!r} to write into")
        storage = "none" if database_only else (sorted(set(project)) if project else "all")
        try:
            manifest = backup_write(path=file, storage=storage)
        except (BackupError, OSError) as exc:
            raise CommandError(f"backup failed: {exc}") from exc
        self.stdout.write(f"{file}: {manifest.summary()}")
