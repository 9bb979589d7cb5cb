"""What a tool call came to: a value for the model, or an error message it can act on."""

from dataclasses import dataclass
from typing import Any

from roject.errors import AppError

# Of a name or value an error message echoes: what a client or a model sent may be huge.
ECHOED_CHARS = 100


class ToolError(AppError):
    """A failure the model should read and can correct: its message is what it reads.

    Tools raise it (the storage gate's StorageError counts the same); the registry turns it
    into a failed ToolOutcome, so nothing a tool raises ever ends the turn.
    """


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    """A finished call: `value` when it worked, else `error` for the model."""

    ok: bool
    value: Any = None
    error: str = ""

    @classmethod
    def success(cls, value: Any) -> "ToolOutcome":
        return cls(True, value)

    @classmethod
    def failure(cls, message: str) -> "ToolOutcome":
        return cls(False, None, message)

    @property
    def result(self) -> Any:
        """As the model reads it and the history stores it: the value, or {"error": ...}."""
        return self.value if self.ok else {"error": self.error}


def echoed(value: str, limit: int = ECHOED_CHARS) -> str:
    """`value` as an error message names it: its first `limit` characters and an ellipsis
    when it is longer, never cut between the two halves of a surrogate pair."""
    if len(value) <= limit:
        return value
    cut = limit - 1 if "\ud800" <= value[limit - 1] <= "\udbff" else limit
    return value[:cut] + "…"
