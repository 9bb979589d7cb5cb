from django.core.management.base import BaseCommand

from rojos.mcp.accounts import accounts_reseal


class Command(BaseCommand):
    help = (
        "Seal every MCP account's OAuth tokens again under the first key of "
        "ROJO_MCP_TOKEN_KEYS: run it after listing a new key first, before dropping the old."
    )

    def handle(self, *args, **options):
        resealed, unopened = accounts_reseal()
        self.stdout.write(f"{resealed} MCP accounts sealed again under the first key")
        if unopened:
            self.stderr.write(
                f"{unopened} MCP accounts open with none of the keys: their people sign in again"
            )
