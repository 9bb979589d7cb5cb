from django.core.management.base import BaseCommand

from roject.doctor import Context, doctor_run


class Command(BaseCommand):
    help = (
        "Check this deployment's configuration: one line a finding, each with its fix. Exit "
        "status: 0 all well, 1 warnings only, 2 errors."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--url", default="", help="The address people use (https://chat.example.com)."
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
        context = Context(url=url, processes=processes, network=not no_network)
        findings = doctor_run(context=context, kinds=("settings", "runtime", "network"))
        for finding in findings:
            self.stdout.write(finding.line())
        if not findings:
            self.stdout.write("ok      nothing found.")
        levels = {finding.level for finding in findings}
        raise SystemExit(2 if "error" in levels else 1 if levels else 0)
