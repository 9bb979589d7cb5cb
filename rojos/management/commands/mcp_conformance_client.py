import asyncio
import json
import os
import tempfile
from pathlib import Path

import httpx2
from django.core.management.base import BaseCommand, CommandError
from mcp.shared.exceptions import MCPError

from rojos.mcp.conformance import ScenarioError, conformance_run
from rojos.mcp.connection import McpUnavailable
from rojos.mcp.oauth import OAuthFlowError


class Command(BaseCommand):
    help = (
        "Run Rojo's MCP client against one scenario of the MCP conformance suite (npm "
        "@modelcontextprotocol/conformance): the suite gives the URL and names the scenario "
        "in MCP_CONFORMANCE_SCENARIO (credentials, if any, in MCP_CONFORMANCE_CONTEXT)."
    )
    requires_system_checks = []  # a client of a test server: neither the database nor the site

    def add_arguments(self, parser):
        parser.add_argument("url", help="The scenario's MCP server, as the suite gives it.")

    def handle(self, *args, url: str, **options):
        scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
        if not scenario:
            raise CommandError("MCP_CONFORMANCE_SCENARIO is not set: run this from the suite")
        try:
            context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
        except json.JSONDecodeError as exc:
            raise CommandError(f"MCP_CONFORMANCE_CONTEXT is not JSON: {exc}") from None
        with tempfile.TemporaryDirectory() as root:
            try:
                outcome = asyncio.run(
                    conformance_run(url=url, scenario=scenario, context=context, root=Path(root))
                )
            except (McpUnavailable, OAuthFlowError, ScenarioError) as exc:
                raise CommandError(str(exc)) from None
            except MCPError as exc:
                raise CommandError(f"the server answered an error: {exc.error.message}") from None
            except (httpx2.HTTPError, TimeoutError) as exc:
                raise CommandError(f"{scenario}: {exc.__class__.__name__}: {exc}") from None
        self.stdout.write(outcome)
