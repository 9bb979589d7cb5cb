"""A tool's name as providers accept it on the wire (^[a-zA-Z0-9_-]{1,64}$, OpenAI's rule).

The registry refuses any other name, MCP tools' names are made into one, and a name the
model made up outside it is sent back as another: the tools, the MCP client and the
provider share the rule, so it sits below them all.
"""

import re

MAX_LENGTH = 64
_CHARACTERS = "A-Za-z0-9_-"
WIRE_NAME = re.compile(f"[{_CHARACTERS}]{{1,{MAX_LENGTH}}}")
# A character no wire name may hold.
NOT_WIRE = re.compile(f"[^{_CHARACTERS}]")


def wire_name_valid(name: object) -> bool:
    """Whether `name` is a string providers accept as a tool's name."""
    return isinstance(name, str) and WIRE_NAME.fullmatch(name) is not None
