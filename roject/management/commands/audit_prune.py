from datetime import timedelta

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone
from django.utils.translation import ngettext

from roject.audit.log import audit_prune
from roject.models import AuditEntry


class Command(BaseCommand):
    help = (
        "Delete the audit entries older than ROJO_AUDIT_RETENTION_DAYS (or --days); "
        "prints how many went. 0 days keeps every entry."
    )

    def add_arguments(self, parser):
        parser.add_argument("--days", type=int, metavar="N", help="Keep the last N days.")
        parser.add_argument(
            "--dry-run", action="store_true", help="Count what would go; delete nothing."
        )

    def handle(self, *args, days, dry_run, **options):
        days = settings.ROJO_AUDIT_RETENTION_DAYS if days is None else days
        if days < 0:
            raise CommandError("--days must be 0 (keep all) or more")
        if days == 0:
            self.stdout.write("0 audit entries pruned (retention is 0: every entry is kept)")
            return
        if dry_run:
            cutoff = timezone.now() - timedelta(days=days)
            count = AuditEntry.objects.filter(at__lt=cutoff).count()
            self.stdout.write(f"{_entries(count, days)} would be pruned")
            return
        count = audit_prune(days=days)
        self.stdout.write(f"{_entries(count, days)} pruned")


def _entries(count: int, days: int) -> str:
    return (
        f"{count} {ngettext('audit entry', 'audit entries', count)} older than {days} "
        f"{ngettext('day', 'days', days)}"
    )
