from django.core.management.base import BaseCommand
from django.utils.translation import ngettext

from rojos.mcp.accounts import accounts_reseal, client_secrets_reseal


class Command(BaseCommand):
    help = (
        "Seal every MCP account's OAuth tokens, and every MCP server's OAuth client secret, "
        "again under the first key of ROJO_MCP_TOKEN_KEYS: run it after listing a new key "
        "first, before dropping the old."
    )

    def handle(self, *args, **options):
        resealed, unopened = accounts_reseal()
        self.stdout.write(
            ngettext(
                "%(n)d MCP account sealed again under the first key",
                "%(n)d MCP accounts sealed again under the first key",
                resealed,
            )
            % {"n": resealed}
        )
        if unopened:
            self.stderr.write(
                ngettext(
                    "%(n)d MCP account opens with none of the keys: its person signs in again",
                    "%(n)d MCP accounts open with none of the keys: their people sign in again",
                    unopened,
                )
                % {"n": unopened}
            )
        secrets, unopened_servers = client_secrets_reseal()
        self.stdout.write(
            ngettext(
                "%(n)d MCP server's client secret sealed again under the first key",
                "%(n)d MCP servers' client secrets sealed again under the first key",
                secrets,
            )
            % {"n": secrets}
        )
        for slug in unopened_servers:
            self.stderr.write(
                f"MCP server {slug!r}: its OAuth client secret opens with none of the keys; "
                "set it again in the admin"
            )
