"""Model-facing names of MCP tools: `<server>__<tool>`, valid for every provider.

Providers accept tool names matching ^[a-zA-Z0-9_-]{1,64}$. Other characters become `_`;
a name still too long keeps its start and ends with a short hash of the whole name, so two
long names that share their first 55 characters still differ.
"""

import hashlib

from rojos.tool_names import MAX_LENGTH, NOT_WIRE


def model_tool_name(server_slug: str, tool_name: str) -> str:
    """The name the model sees for `tool_name` of the server `server_slug`."""
    full = f"{server_slug}__{tool_name}"
    name = NOT_WIRE.sub("_", full)
    if len(name) <= MAX_LENGTH and name == full:
        return name
    # Replaced characters could make two names equal, and a cut one more so: the hash of
    # the whole name keeps them apart.
    digest = hashlib.sha256(full.encode()).hexdigest()[:8]
    return f"{name[: MAX_LENGTH - 9]}_{digest}"
