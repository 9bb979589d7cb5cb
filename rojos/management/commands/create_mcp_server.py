import os
import shlex

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from django.utils.text import slugify

from roject.audit.log import AuditAction, audit_command
from roject.members.projects import validation_text
from rojos.changes.config_audit import MCP_NAMES_ONLY, config_audit, field_changes
from rojos.mcp.sealed import seal
from rojos.models import McpServer


def _pairs(values: list[str], flag: str) -> dict[str, str]:
    pairs = {}
    for value in values:
        name, sep, rest = value.partition("=")
        if not sep or not name:
            raise CommandError(f"{flag} {value!r}: expected NAME=VALUE")
        pairs[name] = rest
    return pairs


class Command(BaseCommand):
    help = "Register an MCP server (a stdio command or a streamable HTTP URL); prints its slug."

    def add_arguments(self, parser):
        parser.add_argument("--name", required=True)
        where = parser.add_mutually_exclusive_group(required=True)
        where.add_argument(
            "--command",
            metavar='"CMD ARG…"',
            help="The command line of a stdio server; {project_root} is the project's directory.",
        )
        where.add_argument("--url", help="The endpoint of a streamable HTTP server.")
        parser.add_argument(
            "--env",
            action="append",
            default=[],
            metavar="NAME=VALUE",
            help="A variable for the stdio server (stored write-only).",
        )
        parser.add_argument(
            "--env-from",
            action="append",
            default=[],
            metavar="NAME=ENVVAR",
            help="A variable for the stdio server, read from this app's environment.",
        )
        parser.add_argument(
            "--header-from",
            action="append",
            default=[],
            metavar="HEADER=ENVVAR",
            help="An HTTP header, read from this app's environment.",
        )
        parser.add_argument(
            "--sign-in",
            choices=["person", "shared"],
            help="HTTP: OAuth, each member with their own account (person), or one shared "
            "account an admin connects (shared); without it, the fixed headers.",
        )
        parser.add_argument("--oauth-client-id", default="", help="A client registered for Rojo.")
        parser.add_argument(
            "--oauth-issuer", default="", help="The authorization server it is registered with."
        )
        parser.add_argument(
            "--oauth-client-secret-env",
            default="",
            metavar="ENVVAR",
            help="The client's secret, read from this variable now and stored sealed.",
        )
        parser.add_argument(
            "--trusted",
            action="store_true",
            help="Trust the server's tool annotations (readOnlyHint): its read-only tools "
            "then run unasked and reach viewers. Untrusted, all its tools count as writing.",
        )

    def handle(self, *args, name, command, url, env, env_from, header_from, trusted, **options):
        slug = slugify(name)
        secret_env = options["oauth_client_secret_env"]
        if secret_env and not os.environ.get(secret_env):
            raise CommandError(f"--oauth-client-secret-env: {secret_env} is not set")
        if not slug:
            raise CommandError(f"server name {name!r} gives an empty slug")
        if McpServer.objects.filter(slug=slug).exists():
            raise CommandError(f"an MCP server with slug {slug!r} already exists")
        if command is not None:
            try:
                words = shlex.split(command)
            except ValueError as exc:
                raise CommandError(f"--command: {exc}") from None
            if not words:
                raise CommandError("--command is empty")
        if url is not None and (env or env_from):
            raise CommandError("--env and --env-from are for stdio servers (--command)")
        if command is not None and header_from:
            raise CommandError("--header-from is for HTTP servers (--url)")
        server = McpServer(
            name=name,
            slug=slug,
            transport=McpServer.Transport.STDIO
            if command is not None
            else McpServer.Transport.HTTP,
            command=words[0] if command is not None else "",
            args=words[1:] if command is not None else [],
            env=_pairs(env, "--env"),
            env_from=_pairs(env_from, "--env-from"),
            url=url or "",
            headers_from=_pairs(header_from, "--header-from"),
            sign_in=options["sign_in"] or "",
            oauth_client_id=options["oauth_client_id"],
            oauth_issuer=options["oauth_issuer"],
            oauth_client_secret=seal(os.environ[secret_env].encode()) if secret_env else b"",
            trusted=trusted,
        )
        try:
            server.full_clean()
        except ValidationError as exc:
            raise CommandError(validation_text(exc)) from None
        with transaction.atomic():
            server.save()
            config_audit(
                action=AuditAction.MCP_SERVER_CREATED,
                obj=server,
                actor=audit_command("create_mcp_server"),
                details=_created_details(server),
            )
        self.stdout.write(server.slug)


def _created_details(server: McpServer) -> dict:
    """The fields set, with values; of the variables stored, the names only (secrets)."""
    fields = [
        "name", "slug", "transport", "command", "args", "env_from", "url", "headers_from",
        "sign_in", "oauth_client_id", "oauth_issuer", "trusted",
    ]  # fmt: skip
    after = {name: getattr(server, name) for name in fields}
    details = field_changes(fields=fields, before={}, after=after, names_only=MCP_NAMES_ONLY)
    if server.env:
        details["env"] = sorted(server.env)
        details["fields"].append("env")
    if server.oauth_client_secret:
        details["fields"].append("oauth_client_secret")  # that it was set, never its value
    return details
