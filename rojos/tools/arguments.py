"""A tool call's arguments, parsed once when the model's response is complete.

Streamed arguments are only read whole, after the stream ends; what the model sent is kept
as it was (the history stores it and sends it back), beside the parsed object or the reason
it could not be parsed, which the model then reads as the call's error.
"""

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

from .schema import ArgumentError

_CUT_OFF = (
    "the response reached the model's output limit while writing these arguments, so they "
    "were cut off and the call did not run; make the call again with less in it (a long "
    "text in parts: write the start, then add the rest with edits)"
)


def parse_arguments(arguments: str | dict | None) -> dict:
    """Tool-call arguments as a dict: a JSON object string, "" or None (no arguments)."""
    if isinstance(arguments, dict):
        return arguments
    if arguments is not None and not isinstance(arguments, str):
        raise ArgumentError("arguments must be a JSON object")
    if arguments is None or arguments.strip() == "":
        return {}
    try:
        parsed = json.loads(arguments)
    except json.JSONDecodeError as exc:
        raise ArgumentError(
            f"arguments are not valid JSON ({exc.msg} at position {exc.pos}); "
            "send a JSON object matching the tool's parameters"
        ) from None
    if not isinstance(parsed, dict):
        raise ArgumentError("arguments must be a JSON object")
    return parsed


def display_args(arguments: str | dict | None) -> Any:
    """Arguments for display: the parsed object, or the raw text when it is not valid JSON."""
    try:
        return parse_arguments(arguments)
    except ArgumentError:
        return arguments


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One call the model asked for, with its arguments parsed (or why they could not be)."""

    id: str
    name: str
    args: dict | None
    raw: Any = None  # the arguments as sent, shown when they could not be parsed
    problem: str = ""  # why `args` is None

    @classmethod
    def parse(cls, id_: str, name: str, arguments: str | dict | None) -> "ToolCall":
        try:
            return cls(id_, name, parse_arguments(arguments), arguments)
        except ArgumentError as exc:
            return cls(id_, name, None, arguments, str(exc))

    @classmethod
    def of(cls, call: dict) -> "ToolCall":
        """From a stored or streamed OpenAI-style call."""
        function = call.get("function") or {}
        return cls.parse(call.get("id", ""), function.get("name", ""), function.get("arguments"))

    def cut_off(self) -> "ToolCall":
        """The call as the model's output limit left it, when the response ended while its
        arguments were being written (finish_reason "length"): arguments that do not parse
        are told as cut off, so the model sends less at once, not the same again."""
        if self.args is not None:
            return self
        return dataclasses.replace(self, problem=_CUT_OFF)

    @property
    def shown_args(self) -> Any:
        """What the activity line shows: the object, or the raw text the model sent."""
        return self.args if self.args is not None else self.raw
