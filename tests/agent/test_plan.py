"""The rojo's plan (update_plan) through the agent loop and the fake provider: the system
message asks for it only where the tool is offered, a turn starts from the last plan that
worked (the same system message for every step of the turn, the plan there even once its
turn was summarised away), a refused plan is not carried, and the exports show the final
plan."""

import pytest
from asgiref.sync import sync_to_async

from rojos.agent.events import SummaryEvent
from rojos.context.plan import PLAN_ASK
from rojos.context.window import DEFAULT_CHARS_PER_TOKEN, tokens_of, tools_chars
from rojos.conversations.export import conversation_export_json, conversation_export_markdown
from rojos.conversations.usage_report import conversation_usage
from rojos.models import Conversation
from rojos.tools import registry
from tests.support.agent_run import rojo_for, run_turn, valid_history
from tests.support.fake_provider import stream, text_chunks, tool_call_chunks
from tests.support.helpers import NEW_ROJO_TOOLS

pytestmark = pytest.mark.django_db(transaction=True)

PROMPT = "You write the project's docs."
PLAN = {
    "plan": [
        {"step": "Read the outline", "status": "done"},
        {"step": "Write the intro", "status": "in_progress"},
        {"step": "Check the links", "status": "pending"},
    ]
}
CHECKLIST = "- [x] Read the outline\n- [~] Write the intro (in progress)\n- [ ] Check the links"


def system_of(request: dict) -> str:
    first = request["messages"][0]
    assert first["role"] == "system"
    return first["content"]


def plan_reply(plan: dict):
    return stream(tool_call_chunks([("update_plan", plan)]))


async def test_the_next_turn_starts_from_the_last_plan(fake_provider, project, users):
    """Offered, the tool is asked for after the prompt; its plan is acknowledged, stored as
    the call's arguments, and sent with every request of the next turn (not within its own
    turn, whose calls the request holds: the system message stays the same there)."""
    fake_provider.add(
        plan_reply(PLAN), stream(text_chunks("Writing the intro next.")), stream(text_chunks("Ok."))
    )
    rojo = await rojo_for(fake_provider, system_prompt=PROMPT, tools=NEW_ROJO_TOOLS)

    first = await run_turn(project=project, rojo=rojo, user=users["editor"], message="Docs")
    second = await run_turn(
        project=project, rojo=rojo, user=users["editor"], message="Go on",
        conversation=first.conversation,
    )  # fmt: skip

    assert first.error is None and second.error is None
    assert [r.result for r in first.results] == [{"plan": "updated", "steps": 3, "done": 1}]
    one, two, three = fake_provider.requests
    assert "update_plan" in [t["function"]["name"] for t in one["tools"]]
    assert system_of(one).startswith(f"{PROMPT}\n\nFor a task of several steps")
    assert "Your plan" not in system_of(one)
    assert system_of(two) == system_of(one)  # the turn's own call is in its messages
    assert system_of(three).endswith(f"(go on from it):\n{CHECKLIST}")
    history = await valid_history(first.conversation)
    assert '"Write the intro"' in history[1].tool_calls[0]["function"]["arguments"]


async def test_a_refused_plan_is_not_carried(fake_provider, project, users):
    """A plan with two steps in progress is refused with an error the model reads, and the
    next turn starts from the plan before it."""
    two_working = {"plan": [{"step": s, "status": "in_progress"} for s in ("A", "B")]}
    fake_provider.add(
        plan_reply(PLAN),
        stream(text_chunks("Planned.")),
        plan_reply(two_working),
        stream(text_chunks("Sorry.")),
        stream(text_chunks("Ok.")),
    )
    rojo = await rojo_for(fake_provider, tools=NEW_ROJO_TOOLS)
    run = await run_turn(project=project, rojo=rojo, user=users["editor"], message="Plan")
    refused = await run_turn(
        project=project, rojo=rojo, user=users["editor"], message="Replan",
        conversation=run.conversation,
    )  # fmt: skip
    await run_turn(
        project=project, rojo=rojo, user=users["editor"], message="Go on",
        conversation=run.conversation,
    )  # fmt: skip

    assert refused.results[0].ok is False
    assert "at most one step is in progress" in refused.results[0].result["error"]
    assert system_of(fake_provider.requests[-1]).endswith(CHECKLIST)


async def test_a_rojo_without_the_tool_is_not_asked_for_a_plan(fake_provider, project, users):
    """No tool, no ask: a rojo with no prompt and no plan tool sends no system message."""
    fake_provider.add(stream(text_chunks("Hi.")))
    rojo = await rojo_for(fake_provider)  # the test rojos leave update_plan out

    await run_turn(project=project, rojo=rojo, user=users["editor"], message="Hi")

    assert [m["role"] for m in fake_provider.requests[0]["messages"]] == ["user"]


async def test_the_exports_show_the_final_plan(fake_provider, project, users):
    """JSON has the last plan of the active branch; Markdown shows each turn's last plan as
    a checklist in place of its update_plan calls."""
    done = {"plan": [{**step, "status": "done"} for step in PLAN["plan"]]}
    fake_provider.add(plan_reply(PLAN), plan_reply(done), stream(text_chunks("All done.")))
    rojo = await rojo_for(fake_provider, tools=NEW_ROJO_TOOLS)
    run = await run_turn(project=project, rojo=rojo, user=users["editor"], message="Docs")

    exported = await sync_to_async(conversation_export_json)(run.conversation)
    markdown = await sync_to_async(conversation_export_markdown)(run.conversation)

    assert exported["plan"] == done["plan"]
    assert markdown.endswith(
        "All done.\n\n**Plan**\n\n- [x] Read the outline\n- [x] Write the intro\n"
        "- [x] Check the links\n"
    )
    assert "update_plan" not in markdown


async def test_the_plan_is_sent_even_once_its_turn_was_summarised(fake_provider, project, users):
    """A turn too long to send again is summarised, its update_plan call with it: the next
    request holds no such call, and the system message still carries the plan."""
    long = "A long brief of the work to come, line after line.\n" * 250  # ~12,750 chars
    fake_provider.add(
        plan_reply(PLAN),
        stream(text_chunks("Planned.")),
        stream(text_chunks("The person asked for the docs; a plan was set.")),  # the summary
        stream(text_chunks("Ok.")),
    )
    rojo = await rojo_for(fake_provider, context_window=12_000, tools=NEW_ROJO_TOOLS)
    first = await run_turn(project=project, rojo=rojo, user=users["editor"], message=long)
    second = await run_turn(
        project=project, rojo=rojo, user=users["editor"], message=long + "Go on.",
        conversation=first.conversation,
    )  # fmt: skip

    assert second.error is None and second.text == "Ok."
    assert any(isinstance(event, SummaryEvent) for event in second.events)
    last = fake_provider.requests[-1]
    assert not any(m.get("tool_calls") for m in last["messages"])
    assert f"(go on from it):\n{CHECKLIST}\n\n" in system_of(last)  # the summary follows


async def test_the_window_meter_counts_the_plan_the_next_turn_starts_from(
    fake_provider, project, users
):
    """The next request's estimate holds the tool, the ask and the plan as it stands now."""
    fake_provider.add(plan_reply(PLAN), stream(text_chunks("Planned.")))
    rojo = await rojo_for(fake_provider, system_prompt=PROMPT, tools=NEW_ROJO_TOOLS)
    run = await run_turn(project=project, rojo=rojo, user=users["editor"], message="Docs")
    conversation = await Conversation.objects.select_related("rojo").aget(pk=run.conversation.pk)
    used = await sync_to_async(conversation_usage)(conversation=conversation)

    conversation.rojo.tools = [n for n in NEW_ROJO_TOOLS if n != "update_plan"]
    without = await sync_to_async(conversation_usage)(conversation=conversation)

    added = tools_chars([registry.get("update_plan").definition]) + len(PLAN_ASK + CHECKLIST)
    ratio = conversation.rojo.chars_per_token or DEFAULT_CHARS_PER_TOKEN
    gained = used["context"]["used"] - without["context"]["used"]
    assert gained >= tokens_of(added, ratio) - 1
