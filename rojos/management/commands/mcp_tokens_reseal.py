from django.core.management.base import BaseCommand

from rojos.mcp.accounts import accounts_reseal, client_secrets_reseal


class Command(BaseCommand):
    help = (
        "Seal every MCP account's OAuth tokens, and every MCP server's OAuth client secret, "
        "again under the first key of ROJO_MCP_TOKEN_KEYS: run it after listing a new key "
        "first, before dropping the old."
    )

    def handle(self, *args, **options):
        resealed, unopened = accounts_reseal()
        self.stdout.write(f"{resealed} MCP accounts sealed again under the first key")
        if unopened:
            self.stderr.write(
                f"{unopened} MCP accounts open with none of the keys: their people sign in again"
            )
        secrets, unopened_servers = client_secrets_reseal()
        self.stdout.write(
            f"{secrets} MCP server's client secret sealed again under the first key"
            if secrets == 1
            else f"{secrets} MCP servers' client secrets sealed again under the first key"
        )
        for slug in unopened_servers:
            self.stderr.write(
                f"MCP server {slug!r}: its OAuth client secret opens with none of the keys; "
                "set it again in the admin"
            )
