"""manage.py storage_cleanup: remove what crashes left on the storage, saying what."""

from django.core.management.base import BaseCommand

from roject import storage

from ...models import FileChange


class Command(BaseCommand):
    help = (
        "Remove partial undo snapshots, uploads and unpacked archives left in incoming/ (older "
        "than an hour), snapshots no change record names (older than an "
        "hour), temporary files of cut-off writes and scratch copies of crashed re-runs; "
        "prints each path removed."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--dry-run", action="store_true", help="Print what would be removed; remove nothing."
        )

    def handle(self, *args, dry_run: bool, **options):
        verb = "would remove" if dry_run else "removed"
        count, busy = 0, []
        for project_id in storage.storage_project_ids():
            recorded = set(
                FileChange.objects.filter(project_id=project_id).values_list("key", flat=True)
            )
            removed = storage.project_leftovers_remove(
                project_id, whole_root=True, recorded=recorded, dry_run=dry_run
            )
            if removed is None:
                busy.append(project_id)
                continue
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
