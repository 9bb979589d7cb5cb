"""What a server process imports before it serves, so that no request pays for it.

The provider's SDK (openai) and the MCP SDK's client take over a second each to import, and
the HTTP client under the first (aiohttp) a third of one. Every
management command sets Django up and loads the URLconf, and few of them talk to a provider or
an MCP server: the modules that need the SDKs are imported where they are used (the admin's and
the API's self-test, the MCP sign-in views, the signal receivers in `rojos.apps`, the replay, the
provider's client and stream). A server would then import them inside its first chat, sign-in
or self-test, on the event loop, so `roject/asgi.py` imports this module (by dotted string)
before it serves.
"""

from importlib import import_module

# The SDKs themselves, and each module that imports an SDK and is imported where it is used.
MODULES = (
    "aiohttp",
    "openai",
    "mcp_types",
    "rojos.agent.loop",
    "rojos.mcp.accounts",
    "rojos.mcp.connect.flow",
    "rojos.mcp.connect.removal",
    "rojos.mcp.oauth",
    "rojos.mcp.pool",
    "rojos.provider.clients",
    "rojos.provider.stream",
    "rojos.selftest.runner",
)

for name in MODULES:
    import_module(name)
