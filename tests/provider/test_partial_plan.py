"""A forming update_plan call read while it streams: its steps come out of the scanner as
each string ends, from fragments cut anywhere, and ride on its TOOL_CALL_DELTA events."""

import json

import pytest

from rojos.agent.events import event_data
from rojos.agent.tool_call_deltas import ToolCallDeltas
from rojos.provider.accumulator import StreamAccumulator
from rojos.provider.partial_arguments import ArgumentScanner
from tests.support.fake_provider import tool_call_chunks

PLAN = {
    "plan": [
        {"step": 'Read "the outline" é 😀', "status": "done"},
        {"step": "Write\\the intro", "status": "in_progress"},
        {"step": "Check the links", "status": "pending"},
    ],
    "explanation": "The outline is read.",
}


@pytest.mark.parametrize("ensure_ascii", [True, False])
def test_every_cut_gives_the_steps_so_far_exactly(ensure_ascii):
    """Cut in two at every position, then fed the rest: before the end, each value kept is
    complete and right (a step's text only once its string ended); at the end, the plan."""
    text = json.dumps(PLAN, ensure_ascii=ensure_ascii)
    for cut in range(len(text) + 1):
        scanner = ArgumentScanner()
        scanner.feed(text[:cut])
        so_far = scanner.items.get("plan", [])
        assert len(so_far) <= len(PLAN["plan"]), cut
        for item, final in zip(so_far, PLAN["plan"], strict=False):
            assert item.items() <= final.items(), cut
        scanner.feed(text[cut:])
        assert scanner.items == {"plan": PLAN["plan"]}, cut


def test_only_a_top_level_plan_list_counts():
    """A list under another key, or a plan nested deeper, keeps nothing; nor do the paths
    and texts of other tools change."""
    scanner = ArgumentScanner()
    scanner.feed(json.dumps({"edits": [{"step": "x"}], "opts": {"plan": [{"step": "y"}]}}))
    assert scanner.items == {}


def test_a_huge_plan_keeps_at_most_a_hundred_steps():
    scanner = ArgumentScanner()
    scanner.feed(json.dumps({"plan": [{"step": str(n), "status": "pending"} for n in range(500)]}))
    assert len(scanner.items["plan"]) == 100


def test_a_forming_plan_calls_deltas_carry_its_steps(settings):
    """Fed chunk by chunk, an update_plan call's deltas carry its steps so far, each a prefix
    of the plan, the last all of it; a write's deltas carry none."""
    settings.ROJO_TOOL_DELTA_SECONDS = 0.01
    accumulator = StreamAccumulator()
    deltas = ToolCallDeltas(accumulator)
    seen = []
    calls = [("update_plan", PLAN), ("write_text_content", {"path": "a.md", "text": "hi"})]
    for n, chunk in enumerate(tool_call_chunks(calls)):
        accumulator.feed(chunk)
        seen += deltas.due(now=n * 1.0)
    plan = [d for d in seen if d.index == 0]
    assert len(plan) > 2
    for delta in plan:
        assert len(delta.steps) <= 3
        for item, final in zip(delta.steps, PLAN["plan"], strict=False):
            assert item.items() <= final.items()
    assert plan[-1].steps == PLAN["plan"]
    assert event_data(plan[-1])["steps"] == PLAN["plan"]
    writes = [d for d in seen if d.index == 1]
    assert writes and all(d.steps is None for d in writes)
    assert all("steps" not in event_data(d) for d in writes)
