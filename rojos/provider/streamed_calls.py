"""A tool call as its deltas come in (rojos.provider.accumulator), and the id one that came
without an id gets."""

import json
import secrets
import string
from dataclasses import dataclass, field

_ID_ALPHABET = string.ascii_letters + string.digits


def new_call_id() -> str:
    """An id for a tool call that arrived without one."""
    return "call_" + "".join(secrets.choice(_ID_ALPHABET) for _ in range(24))


@dataclass(slots=True)
class StreamedCall:
    id: str | None = None
    index: int | None = None
    name: str = ""
    arguments: list[str] = field(default_factory=list)
    extra: dict = field(default_factory=dict)

    def arguments_text(self) -> str:
        return "".join(self.arguments)

    def looks_complete(self) -> bool:
        text = self.arguments_text().strip()
        if not text:
            return False
        try:
            json.loads(text)
        except ValueError:
            return False
        return True
