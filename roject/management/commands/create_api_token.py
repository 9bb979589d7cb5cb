from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from roject.audit.log import audit_command
from roject.identity.tokens import TokenError, api_token_create


class Command(BaseCommand):
    help = "Create a personal API token for a user; prints the token, this once only."

    def add_arguments(self, parser):
        parser.add_argument("--user", required=True, metavar="USERNAME")
        parser.add_argument("--name", required=True, help="What the token is for.")
        parser.add_argument("--read-only", action="store_true", help="The token never writes.")
        parser.add_argument("--expires-days", type=int, metavar="D", help="Expire after D days.")

    def handle(self, *args, user, name, read_only, expires_days, **options):
        try:
            owner = get_user_model().objects.get(username=user)
        except get_user_model().DoesNotExist:
            raise CommandError(f"no user {user!r}") from None
        try:
            made = api_token_create(
                user=owner,
                name=name,
                read_only=read_only,
                expires_days=expires_days,
                actor=audit_command("create_api_token"),
            )
        except TokenError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(made.secret)
