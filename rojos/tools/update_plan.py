"""update_plan: the rojo's plan for work of several steps, which the page shows as a checklist.

The plan is nothing but the arguments of the rojo's calls: each call states the whole plan
again, so the last call that worked is the plan, in the live turn, after a reload, in an
export and in the next turn's request (rojos.context.plan). The tool touches no files; it
checks the plan and says how far it is, so a malformed plan is an error the model corrects
rather than a checklist the page cannot draw.
"""

from typing import Any

from .base import RojoTool, RojoToolContext
from .outcome import ToolError

STATUSES = ("pending", "in_progress", "done")
MAX_STEPS = 20
MAX_STEP_CHARS = 200
MAX_EXPLANATION_CHARS = 500


def plan_checked(args: Any) -> list[dict]:
    """The steps of a plan's arguments as [{"step", "status"}], or ToolError saying what
    is wrong with them (the schema's types are checked before, but not by every caller)."""
    steps = args.get("plan") if isinstance(args, dict) else None
    if not isinstance(steps, list):
        raise ToolError('give "plan": a list of {"step", "status"} objects')
    if len(steps) > MAX_STEPS:
        raise ToolError(
            f"the plan has {len(steps)} steps; at most {MAX_STEPS} are allowed: "
            "merge small steps into larger ones"
        )
    checked = []
    for number, item in enumerate(steps, 1):
        text = item.get("step") if isinstance(item, dict) else None
        status = item.get("status") if isinstance(item, dict) else None
        if not isinstance(text, str) or not text.strip():
            raise ToolError(f"step {number} has no text")
        if len(text) > MAX_STEP_CHARS:
            raise ToolError(
                f"step {number} is {len(text)} characters long; at most {MAX_STEP_CHARS} "
                "are allowed: say what the step does in one short line"
            )
        if status not in STATUSES:
            raise ToolError(f"step {number}: status must be one of {', '.join(STATUSES)}")
        checked.append({"step": text.strip(), "status": status})
    working = [n for n, item in enumerate(checked, 1) if item["status"] == "in_progress"]
    if len(working) > 1:
        listed = ", ".join(map(str, working))
        raise ToolError(
            f"steps {listed} are all in_progress; at most one step is in progress at a time"
        )
    return checked


class UpdatePlan(RojoTool):
    """Set the plan of a task of several steps: shown to the people as a live checklist.

    On for new rojos: it changes nothing, and a visible plan is what people expect of an
    agent at work on a long task. Offered, it also adds a few lines to the system message
    (rojos.context.plan) asking the model to use it.
    """

    name = "update_plan"
    description = (
        "Keep a short plan for a task of several steps, shown to the people as a checklist. "
        "Call it before starting such a task (3 or more distinct steps), then again each time "
        "a step starts or is finished, always with the whole plan: it replaces the previous "
        "one. Each step is one short line, with a status: pending, in_progress or done; at "
        f"most one step is in_progress at a time; at most {MAX_STEPS} steps. Skip it for "
        "simple requests and questions. Changes no files."
    )
    parameters = {
        "type": "object",
        "properties": {
            "plan": {
                "type": "array",
                "description": "Every step of the plan, in order.",
                "items": {
                    "type": "object",
                    "properties": {
                        "step": {"type": "string", "description": "What the step does."},
                        "status": {"type": "string", "enum": list(STATUSES)},
                    },
                    "required": ["step", "status"],
                },
            },
            "explanation": {
                "type": "string",
                "description": "Optional: why the plan changed, in one sentence.",
            },
        },
        "required": ["plan"],
    }

    async def execute(self, args: dict, ctx: RojoToolContext) -> dict:
        steps = plan_checked(args)
        if len(args.get("explanation") or "") > MAX_EXPLANATION_CHARS:
            raise ToolError(f"the explanation is over {MAX_EXPLANATION_CHARS} characters")
        done = sum(1 for item in steps if item["status"] == "done")
        return {"plan": "updated", "steps": len(steps), "done": done}
