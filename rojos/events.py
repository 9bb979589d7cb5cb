"""What the agent loop yields: text as it streams, each tool call, and each tool result."""

from dataclasses import dataclass
from typing import Any, Literal


@dataclass(frozen=True, slots=True, kw_only=True)
class TextEvent:
    text: str
    type: Literal["text"] = "text"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallEvent:
    id: str
    name: str
    args: Any  # the parsed JSON object, or the raw string when it was not valid JSON
    type: Literal["tool_call"] = "tool_call"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResultEvent:
    id: str
    name: str
    result: Any
    ok: bool
    change: int | None = None  # the undo record of what the call changed, if anything
    type: Literal["tool_result"] = "tool_result"


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalRequiredEvent:
    id: str
    name: str
    args: Any
    preview: dict  # what the call would change: a diff, a move, the paths it would delete
    type: Literal["approval_required"] = "approval_required"


AgentEvent = TextEvent | ToolCallEvent | ToolResultEvent | ApprovalRequiredEvent
