import logging

from django.core.management.base import BaseCommand
from django.db import connection

from roject.doctor import Context, doctor_run, serving_context
from roject.doctor.runtime_checks import NETWORK_SECONDS


def _connection_wait_bounded() -> None:
    """A database connection not made within NETWORK_SECONDS is the answer: through the
    pool's own wait (ROJO_DB_POOL_TIMEOUT, 20 s) for each query, a database that was down
    took the doctor a minute to report. Before its first connection, which makes the pool."""
    pool = connection.settings_dict.get("OPTIONS", {}).get("pool")
    if isinstance(pool, dict):
        pool["timeout"] = NETWORK_SECONDS


class Command(BaseCommand):
    # Django's system checks would query the database before the doctor bounds the wait;
    # the doctor reports what the one of them that queries it does (rojo-key-rule).
    requires_system_checks = []
    help = (
        "Check this deployment's configuration: one line a finding, each with its fix. Exit "
        "status: 0 all well, 1 warnings only, 2 errors."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--url",
            default="",
            help="The address people use (https://chat.example.com); by default "
            "ROJO_PUBLIC_URL, the one the start's doctor checks.",
        )
        parser.add_argument(
            "--processes",
            type=int,
            default=1,
            help="Server processes of the whole install, every container's together.",
        )
        parser.add_argument(
            "--no-network", action="store_true", help="Do not try providers or OIDC."
        )

    def handle(self, *args, url, processes, no_network, **options):
        _connection_wait_bounded()
        # The pool logs each failed try ("error connecting in 'pool-1': …") above the findings;
        # the database finding says why, once.
        logging.getLogger("psycopg.pool").setLevel(logging.CRITICAL)
        # Without --url, the address the start's doctor and /readyz check: `manage.py doctor`
        # in a container then finds what its log said at start, not "nothing found".
        url = url or serving_context().url
        context = Context(url=url, processes=processes, network=not no_network)
        findings = doctor_run(context=context, kinds=("settings", "runtime", "network"))
        for finding in findings:
            self.stdout.write(finding.line())
        if not findings:
            self.stdout.write("ok      nothing found.")
        levels = {finding.level for finding in findings}
        raise SystemExit(2 if "error" in levels else 1 if levels else 0)
