from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from django.db import connection

from roject.backup import BackupError, NotAnArchive, backup_verify
from roject.backup.manifest import schema_refusal


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
        except NotAnArchive as exc:  # the wrong file named, not a broken backup
            raise CommandError(f"{file} is not a backup archive made by `backup` ({exc})") from exc
        except (BackupError, OSError) as exc:
            raise CommandError(f"{file} is not a sound backup: {exc}") from exc
        refusal = schema_refusal(checked.manifest.header, connection)
        if refusal:  # sound, but restore would refuse it here: say so now
            raise CommandError(
                f"{file} is sound, but this installation cannot restore it: {refusal}"
            )
        self.stdout.write(f"{file}: sound. {checked.summary()}")
        for note in checked.notes:  # restorable, but something in it needs the operator
            self.stderr.write(f"warning: {note}")
