from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from django.utils.text import slugify

from roject.audit.log import AuditAction, audit_command
from roject.members.projects import validation_text
from rojos.changes.config_audit import config_audit, field_changes
from rojos.context.prices import rojo_prices_prefill
from rojos.models import McpServer, Rojo, RojoMcpServer, default_tools, validate_base_url
from rojos.models.key_sources import KEY_ENV_RULE, key_env_refusal
from rojos.tools import registry


class Command(BaseCommand):
    help = "Create a rojo (an agent on an OpenAI-compatible endpoint); prints its slug."

    def add_arguments(self, parser):
        parser.add_argument("--name", required=True)
        parser.add_argument("--base-url", required=True)
        parser.add_argument("--model", required=True)
        parser.add_argument(
            "--api-key-env",
            default="",
            metavar="VAR",
            help=f"Environment variable holding the API key ({KEY_ENV_RULE}).",
        )
        parser.add_argument(
            "--tools", default="", help="Comma-separated tool names (default: all)."
        )
        parser.add_argument(
            "--mcp-servers",
            default="",
            metavar="SLUG,SLUG",
            help="MCP servers whose tools the rojo uses (all of each server's tools).",
        )
        parser.add_argument("--system-prompt", default="")
        parser.add_argument("--max-steps", type=int, default=12)
        parser.add_argument(
            "--context-window",
            type=int,
            metavar="N",
            help="The model's window in tokens (default: as the provider lists it, else 32768).",
        )
        parser.add_argument(
            "--max-output-tokens",
            type=int,
            metavar="N",
            help="Tokens kept for each reply (default: a quarter of the window, up to 4096).",
        )

    def handle(
        self,
        *args,
        name,
        base_url,
        model,
        api_key_env,
        tools,
        system_prompt,
        max_steps,
        context_window,
        max_output_tokens,
        mcp_servers,
        **options,
    ):
        slug = slugify(name)
        if not slug:
            raise CommandError(f"rojo name {name!r} gives an empty slug")
        if Rojo.objects.filter(slug=slug).exists():
            raise CommandError(f"a rojo with slug {slug!r} already exists")
        try:
            validate_base_url(base_url)
        except ValidationError as exc:
            raise CommandError(f"--base-url: {exc.messages[0]}") from None
        refusal = key_env_refusal(api_key_env)
        if refusal:
            raise CommandError(f"--api-key-env: {refusal}")
        names = [t.strip() for t in tools.split(",") if t.strip()] or default_tools()
        unknown = [n for n in names if n not in registry]
        if unknown:
            raise CommandError(
                f"unknown tools: {', '.join(unknown)} (known: {', '.join(registry.names())})"
            )
        servers = _mcp_servers(mcp_servers)
        if max_steps < 1:
            raise CommandError("--max-steps must be at least 1")
        rojo = Rojo(
            name=name,
            slug=slug,
            base_url=base_url,
            model=model,
            api_key_env=api_key_env,
            tools=names,
            system_prompt=system_prompt,
            max_steps=max_steps,
            context_window=context_window,
            max_output_tokens=max_output_tokens,
        )
        rojo_prices_prefill(rojo)
        try:
            rojo.full_clean()  # lengths: PostgreSQL refuses what SQLite would store
        except ValidationError as exc:
            raise CommandError(validation_text(exc)) from None
        with transaction.atomic():
            rojo.save()
            RojoMcpServer.objects.bulk_create(
                RojoMcpServer(rojo=rojo, server=server) for server in servers
            )
            config_audit(
                action=AuditAction.ROJO_CREATED,
                obj=rojo,
                actor=audit_command("create_rojo"),
                details=_created_details(rojo, servers),
            )
        self.stdout.write(rojo.slug)


def _mcp_servers(slugs: str) -> list[McpServer]:
    wanted = [s.strip() for s in slugs.split(",") if s.strip()]
    found = {server.slug: server for server in McpServer.objects.filter(slug__in=wanted)}
    unknown = [slug for slug in wanted if slug not in found]
    if unknown:
        known = ", ".join(McpServer.objects.values_list("slug", flat=True)) or "none"
        raise CommandError(f"unknown MCP servers: {', '.join(unknown)} (known: {known})")
    return [found[slug] for slug in dict.fromkeys(wanted)]


def _created_details(rojo: Rojo, servers: list[McpServer]) -> dict:
    """The fields the command set, with their values (a new rojo holds no key: only the
    name of the variable that does)."""
    fields = ["name", "slug", "base_url", "model", "api_key_env", "tools", "system_prompt"]
    fields += ["max_steps", "context_window", "max_output_tokens"]
    after = {name: getattr(rojo, name) for name in fields}
    details = field_changes(fields=fields, before={}, after=after, names_only=frozenset())
    if servers:
        details["mcp_servers"] = {"added": [server.slug for server in servers]}
    return details
