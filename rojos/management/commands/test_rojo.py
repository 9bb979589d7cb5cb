import asyncio

from django.core.management.base import BaseCommand, CommandError
from django.utils.translation import ngettext

from rojos.errors import TurnError
from rojos.models import Rojo
from rojos.selftest.results import profile_table
from rojos.selftest.runner import rojo_selftest_run

# The exit status of a test that could tell nothing (a provider out of reach, a refused key):
# a script that runs it must not take it for a pass. 1 is an unknown slug or a refused key
# variable (CommandError's own).
NOTHING_VERIFIED = 3


class Command(BaseCommand):
    help = (
        "Test a rojo's provider and model with a short, bounded set of requests (a streamed "
        "answer, a forced tool call, two calls in one response, usage, reasoning, an image, "
        "the listed window, refused options); print what works and keep it as the model's "
        "capability profile."
    )

    def add_arguments(self, parser):
        parser.add_argument("slug", help="The rojo's slug.")
        parser.add_argument(
            "--model",
            metavar="M",
            help="Test this model on the rojo's provider (default: its own).",
        )

    def handle(self, *args, slug, model, **options):
        try:
            rojo = Rojo.objects.get(slug=slug)
        except Rojo.DoesNotExist:
            raise CommandError(f"No rojo with the slug {slug!r}.") from None
        try:
            profile = asyncio.run(rojo_selftest_run(rojo=rojo, model=model))
        except TurnError as exc:  # a misconfigured rojo (its key's variable refused, …)
            raise CommandError(str(exc)) from None
        self.stdout.write(f"{rojo.slug} · {profile.model} · {rojo.base_url}")
        requests = f"{profile.requests} {ngettext('request', 'requests', profile.requests)}"
        self.stdout.write(f"{requests}, taken {profile.taken}\n")
        self.stdout.write(profile_table(profile))
        if profile.verified_nothing:
            raise CommandError(profile.nothing_verified_text(), returncode=NOTHING_VERIFIED)
