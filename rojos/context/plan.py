"""The rojo's plan in its requests: the ask to keep one, and the plan it last set.

The plan is the arguments of the last `update_plan` call that worked (rojos.tools.update_plan).
When the tool is offered, the system message asks for it and carries the plan as it stood
when the turn began, so a turn starts from the last plan even when compaction left the call
out of the request. Within a turn the system message stays as it was (the turn's own calls
are in the request); a plan that changed on every step would also change the start of every
request, which providers' prompt caches key on.
"""

import json

from rojos.models import Message
from rojos.tools.outcome import ToolError
from rojos.tools.update_plan import plan_checked

TOOL_NAME = "update_plan"
_MARKS = {"done": "[x]", "in_progress": "[~]", "pending": "[ ]"}

PLAN_ASK = (
    "For a task of several steps (three or more), keep a plan with the update_plan tool: "
    "set it before you start, then call it again as each step starts and when it is done, "
    "with one step in progress at a time. People follow your work by it. Skip it for simple "
    "requests and questions."
)


def plan_latest(messages: list[Message]) -> list[dict] | None:
    """The steps of the last update_plan call among `messages` whose result was not an
    error; None if there is none."""
    calls: dict[str, str] = {}
    plan = None
    for message in messages:
        if message.role == Message.Role.ASSISTANT:
            for call in message.tool_calls or ():
                function = call.get("function") or {}
                if function.get("name") == TOOL_NAME:
                    calls[call.get("id")] = function.get("arguments") or ""
        elif message.role == Message.Role.TOOL and message.tool_call_id in calls:
            if message.is_error:
                continue
            try:
                plan = plan_checked(json.loads(calls[message.tool_call_id]))
            except (ValueError, ToolError):
                continue
    return plan


def plan_lines(plan: list[dict]) -> list[str]:
    """The plan as a Markdown checklist (in progress marked [~] for the model's text, and
    "(in progress)" so that a reader of the export sees it too)."""
    return [
        f"- {_MARKS[item['status']]} {item['step']}"
        + (" (in progress)" if item["status"] == "in_progress" else "")
        for item in plan
    ]


def plan_text(messages: list[Message], tools: list[dict], *, next_turn: bool = False) -> str:
    """The system message's part about the plan: "" unless update_plan is among `tools`;
    the plan is the one set before the last user message of `messages` (the turn's), or
    after it for the turn that has not begun (`next_turn`: the window's estimate)."""
    if not any((tool.get("function") or {}).get("name") == TOOL_NAME for tool in tools):
        return ""
    users = [n for n, message in enumerate(messages) if message.role == Message.Role.USER]
    plan = plan_latest(messages[: users[-1]] if users and not next_turn else messages)
    if not plan:
        return PLAN_ASK
    done = all(item["status"] == "done" for item in plan)
    state = "every step done; start a new plan for new work" if done else "go on from it"
    return f"{PLAN_ASK}\n\nYour plan as it stood when this turn began ({state}):\n" + "\n".join(
        plan_lines(plan)
    )
