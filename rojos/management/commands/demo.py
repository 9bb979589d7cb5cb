import os
import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from django.http.request import validate_host

from roject.audit.log import AuditAction, audit_command
from roject.members.projects import project_create
from roject.models import Membership, Project, Role
from rojos.changes.config_audit import config_audit, field_changes
from rojos.context.prices import rojo_prices_prefill
from rojos.models import Rojo, validate_base_url
from rojos.models.key_sources import endpoint_moved
from rojos.models.rojo import DEMO_SLUG

DEFAULT_BASE_URL = "http://127.0.0.1:11434/v1"  # a local Ollama
DEFAULT_MODEL = "llama3.1"
# Addresses a server binds to that name no host: the browser on this machine uses 127.0.0.1.
ANY_ADDRESS = {"0.0.0.0", "::", "[::]"}
# Variables other tools read that a newcomer sets for the demo rojo, which reads its own.
OTHER_NAMES = {
    "OPENAI_BASE_URL": "ROJO_BASE_URL",
    "OPENAI_API_BASE": "ROJO_BASE_URL",
    "OPENAI_MODEL": "ROJO_MODEL",
    "OPENAI_API_KEY": "ROJO_API_KEY",
}


class Command(BaseCommand):
    help = (
        "Create or refresh the demo user, project and rojo. The rojo uses ROJO_BASE_URL, "
        "ROJO_MODEL and the key in ROJO_API_KEY. Prints how to log in."
    )

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", default="8000")

    def handle(self, *args, host, port, **options):
        opened = _opened_host(host)
        if not validate_host(opened, settings.ALLOWED_HOSTS):
            raise CommandError(
                f"{host!r} (make run's HOST) is not in ALLOWED_HOSTS, so the server would "
                f"answer http://{host}:{port}/ with 400 Bad Request: set ALLOWED_HOSTS={host} "
                "as well."
            )
        base_url = os.environ.get("ROJO_BASE_URL") or DEFAULT_BASE_URL
        try:
            validate_base_url(base_url)
        except ValidationError as exc:
            raise CommandError(f"ROJO_BASE_URL: {exc.messages[0]}") from None
        password = secrets.token_urlsafe(12)
        user, _ = get_user_model().objects.get_or_create(username="demo")
        user.set_password(password)
        user.is_staff = user.is_superuser = True
        user.save()
        project = Project.objects.filter(slug="demo").first() or project_create(
            name="Demo", owner=user
        )
        Membership.objects.update_or_create(
            user=user, project=project, defaults={"role": Role.OWNER}
        )
        model = os.environ.get("ROJO_MODEL") or DEFAULT_MODEL
        with transaction.atomic():  # the rojo and its audit entry together
            before = Rojo.objects.filter(slug=DEMO_SLUG).values_list("base_url", flat=True).first()
            # A key stored for another endpoint is never sent to this one
            # (rojos.models.key_sources).
            moved = {"api_key": ""} if before and endpoint_moved(before, base_url) else {}
            rojo, created = Rojo.objects.update_or_create(
                slug=DEMO_SLUG,
                defaults={
                    **moved,
                    "name": "Demo rojo",
                    "base_url": base_url,
                    "model": model,
                    "api_key_env": "ROJO_API_KEY",
                    "system_prompt": (
                        "You work on the files of the user's project through your tools. "
                        "Paths are relative to the project root. Make the changes asked for, "
                        "then answer with a short summary."
                    ),
                    # What was learned or priced for another provider or model does not hold.
                    "listed_window": None,
                    "refused_window": None,
                    "capability_profiles": {},
                    "price_input": None,
                    "price_cached_input": None,
                    "price_output": None,
                },
            )
            if rojo_prices_prefill(rojo):
                rojo.save(update_fields=["price_input", "price_cached_input", "price_output"])
            fields = ["name", "base_url", "model", "api_key_env"]
            after = {name: getattr(rojo, name) for name in fields}
            config_audit(
                action=AuditAction.ROJO_CREATED if created else AuditAction.ROJO_CHANGED,
                obj=rojo,
                actor=audit_command("demo"),
                details=field_changes(
                    fields=fields, before={}, after=after, names_only=frozenset()
                ),
            )
        self.stdout.write(
            f"Demo project {project.slug!r}, rojo 'demo' on {base_url} with model {model!r}.\n"
            f"Open http://{opened}:{port}/ and log in as demo / {password}\n"
            "(admin at /admin/ with the same login; the password is new each run)"
        )
        if host in ANY_ADDRESS:
            self.stdout.write(
                "From another machine, open this one's name or address, once ALLOWED_HOSTS "
                "names it (ALLOWED_HOSTS=chat.lan,127.0.0.1,localhost make run HOST=0.0.0.0)."
            )
        for other, own in OTHER_NAMES.items():
            if os.environ.get(other) and not os.environ.get(own):
                self.stderr.write(
                    f"Note: {other} is set, but the demo rojo reads {own}, which is not: "
                    f"{own}=${other} make run."
                )


def _opened_host(host: str) -> str:
    """The host the browser opens for a server bound to `host`: itself, or for any address
    the first of 127.0.0.1 and ALLOWED_HOSTS that the server answers."""
    if host not in ANY_ADDRESS:
        return host
    names = ("127.0.0.1", *settings.ALLOWED_HOSTS)
    return next((n for n in names if validate_host(n, settings.ALLOWED_HOSTS)), "127.0.0.1")
