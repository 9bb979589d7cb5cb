from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from roject.members.projects import ProjectError, project_create
from roject.models import Role


def _user(username: str):
    try:
        return get_user_model().objects.get(username=username)
    except get_user_model().DoesNotExist:
        raise CommandError(f"no user {username!r}") from None


class Command(BaseCommand):
    help = "Create a project with an owner and optional members; prints its slug."

    def add_arguments(self, parser):
        parser.add_argument("--name", required=True)
        parser.add_argument("--owner", required=True, metavar="USERNAME")
        parser.add_argument(
            "--member",
            action="append",
            default=[],
            metavar="USERNAME:ROLE",
            help=f"Add a member; ROLE is one of {', '.join(Role.values)}. Repeatable.",
        )

    def handle(self, *args, name, owner, member, **options):
        members = {}
        for spec in member:
            username, _, role = spec.partition(":")
            if role not in Role.values:
                raise CommandError(
                    f"--member {spec!r}: role must be one of {', '.join(Role.values)}"
                )
            members[_user(username)] = role
        try:
            project = project_create(name=name, owner=_user(owner), members=members)
        except ProjectError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(project.slug)
