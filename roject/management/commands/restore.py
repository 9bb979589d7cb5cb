from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError

from roject.backup import BackupError, NotAnArchive, backup_restore


class Command(BaseCommand):
    help = (
        "Restore an archive written by `backup` into this installation (either database), "
        "which must be empty (migrated, nothing in it) unless --replace. The archive is "
        "checked whole first; all of it is restored or nothing. docs/operations.md, "
        "'Backups'."
    )

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path, help="The archive.")
        parser.add_argument(
            "--replace",
            action="store_true",
            help=(
                "Delete what this installation holds first: every row, and the storage of "
                "the projects the archive carries or no longer has (the others' files stay)."
            ),
        )

    def handle(self, *args, file, replace, **options):
        try:
            restored = backup_restore(path=file, replace=replace)
        except NotAnArchive as exc:  # the wrong file named, not a broken backup
            raise CommandError(
                f"restore refused: {file} is not a backup archive made by `backup` ({exc}); "
                "nothing was restored"
            ) from exc
        except (BackupError, OSError, DatabaseError) as exc:
            raise CommandError(f"restore refused: {exc}; nothing was restored") from exc
        self.stdout.write(f"restored {file}: {restored.summary()}")
        for note in restored.notes:  # restored, but something in it needs the operator
            self.stderr.write(f"warning: {note}")
        for hook, error in restored.hooks_failed:  # after the commit: the restore stands
            raise CommandError(
                f"restored {file}, but its clean-up {hook} failed: {error}; the restore "
                "itself is complete and committed, only that clean-up did not run"
            )
