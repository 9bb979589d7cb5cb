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
    type: Literal["tool_result"] = "tool_result"


AgentEvent = TextEvent | ToolCallEvent | ToolResultEvent
