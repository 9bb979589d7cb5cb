"""manage.py storage_cleanup: remove what crashes left on the storage, saying what."""

import time
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand

from roject import storage
from roject.backup.interrupted import restores_settled

from ...conversations.services import kept_referenced
from ...models import FileChange, Message

# An image or PDF uploaded waits in the message box until it is sent: one no message refers
# to is removed only once this old (kept again, it counts as new).
UNSENT_SECONDS = 24 * 3600


class Command(BaseCommand):
    help = (
        "Remove partial undo snapshots, uploads and unpacked archives left in incoming/ "
        "(older than an hour), snapshots no change record names or whose change was undone "
        "(older than an hour), images and PDFs uploaded but never sent (older than a day), "
        "temporary files of cut-off writes, scratch copies of crashed re-runs and the staging "
        "directories of killed restores (never a running one's); prints each path removed."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--dry-run", action="store_true", help="Print what would be removed; remove nothing."
        )

    def handle(self, *args, dry_run: bool, **options):
        verb = "would remove" if dry_run else "removed"
        count, busy = 0, []
        for path in restores_settled(dry_run=dry_run):
            self.stdout.write(f"{verb} {path}")
            count += 1
        for project_id in storage.storage_project_ids():
            # An undone change's copy is needed no more (it is neither undone again nor
            # restored from): one a crash left after its undo was marked goes too.
            live = FileChange.objects.filter(project_id=project_id, undone__isnull=True)
            recorded = set(live.values_list("key", flat=True))
            removed = storage.project_leftovers_remove(
                project_id, whole_root=True, recorded=recorded, dry_run=dry_run
            )
            if removed is None:
                busy.append(project_id)
                continue
            removed += self._unsent(project_id, dry_run=dry_run)
            for path in removed:
                self.stdout.write(f"{verb} {path}")
            count += len(removed)
        for path in storage.scratch_leftovers_remove(dry_run=dry_run):
            self.stdout.write(f"{verb} {path}")
            count += 1
        for project_id in busy:
            self.stderr.write(f"project {project_id} is changing files now; run again later")
        entries = "entries" if count != 1 else "entry"
        self.stdout.write(f"{count} {entries} {'would be removed' if dry_run else 'removed'}")

    def _unsent(self, project_id: int, *, dry_run: bool) -> list[str]:
        """The project's kept images and PDFs no message refers to, over UNSENT_SECONDS old."""
        messages = Message.objects.filter(conversation__project_id=project_id)
        older_than = time.time() - UNSENT_SECONDS
        found = []
        for part in storage.KEPT_PARTS:
            unused = storage.kept_unused(
                project_id=project_id,
                part=part,
                used=kept_referenced(messages, part),
                older_than=older_than,
            )
            if not dry_run:
                storage.kept_remove(
                    project_id=project_id, part=part, sha256s=[p.name for p in unused]
                )
            found += unused
        base = Path(settings.ROJO_STORAGE_DIR)
        return [str(path.relative_to(base)) for path in found]
