from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from roject.backup import BackupError, backup_verify


class Command(BaseCommand):
    help = (
        "Check an archive written by `backup` without restoring it: every part against "
        "its manifest's SHA-256 and counts, and that this Rojo can restore it."
    )

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path, help="The archive.")

    def handle(self, *args, file, **options):
        try:
            checked = backup_verify(path=file)
        except (BackupError, OSError) as exc:
            raise CommandError(f"{file} is not a sound backup: {exc}") from exc
        self.stdout.write(f"{file}: sound. {checked.summary()}")
