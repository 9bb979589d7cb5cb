"""The rojo's plan in Chromium: a five-step task whose update_plan calls redraw the checklist
at the top of the turn as each one arrives (the stream held between them), the next turn
starting from the last plan, the checklist back after a reload, and the plan in both
exports. Step texts with markup are shown as text."""

import json
import threading
from pathlib import Path

import pytest
from playwright.sync_api import expect

from roject.storage import project_root_create
from tests.support.browser import screenshot
from tests.support.fake_provider import Gate, chunk, stream, text_chunks, tool_call_chunks
from tests.support.helpers import NEW_ROJO_TOOLS, make_rojo

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

STEPS = [
    "Read the outline",
    "Write <b>the intro</b>",
    "Write the body",
    "Check the links",
    "Sum up",
]


def plan(done: int) -> dict:
    """The plan with `done` steps done and the next one in progress."""
    return {
        "plan": [
            {
                "step": step,
                "status": "done" if n < done else "in_progress" if n == done else "pending",
            }
            for n, step in enumerate(STEPS)
        ]
    }


def plan_reply(done: int, gate: threading.Event | None = None, **more):
    """A response calling update_plan, held at its start until `gate` is set."""
    chunks = tool_call_chunks([("update_plan", plan(done))], **more)
    return stream(Gate(gate), *chunks) if gate is not None else stream(*chunks)


def expect_checklist(box, done: int) -> None:
    marks = ["done"] * done + (["in_progress"] if done < 5 else []) + ["pending"] * (4 - done)
    expect(box.locator(".turn-plan-head")).to_contain_text(f"{done} of 5 done")
    expect(box.locator(".turn-plan-step")).to_have_count(5)
    for item, status in zip(box.locator(".turn-plan-step").all(), marks, strict=True):
        expect(item).to_have_attribute("data-status", status)


def test_a_five_step_plan_updates_live_carries_over_and_is_exported(
    page_for, users, project, fake_provider
):
    """Each update_plan call redraws the checklist under the user's message while the next
    response is held; the second turn shows the last plan before its own first call, and its
    requests carry it; a reload shows both turns' checklists; both exports have the plan."""
    project_root_create(project.pk)
    make_rojo(fake_provider.base_url, approval_tools=[], tools=NEW_ROJO_TOOLS)
    gates = [threading.Event() for _ in range(6)]
    fake_provider.add(
        plan_reply(0),
        plan_reply(1, gates[0]),
        plan_reply(2, gates[1]),
        stream(Gate(gates[2]), *text_chunks("Step three is next; say go on.")),
        plan_reply(3, gates[3]),
        plan_reply(4, gates[4]),
        plan_reply(5, gates[5]),
        stream(*text_chunks("All five done.")),
    )
    page = page_for(users["editor"])
    page.goto(f"/projects/{project.pk}/")
    page.get_by_label("Message").fill("Write the report")
    page.keyboard.press("Enter")

    box = page.locator(".turn-plan")
    expect(box).to_have_count(1)
    expect_checklist(box, 0)  # the first call, drawn while the next response is held
    expect(box.locator(".turn-plan-text").nth(1)).to_have_text("Write <b>the intro</b>")
    expect(box.locator("b")).to_have_count(0)
    # At the top of the turn: right after its user message, before the activity lines.
    assert box.evaluate("b => b.previousElementSibling.classList.contains('user')")
    for done in (1, 2):
        gates[done - 1].set()
        expect_checklist(box, done)
    # Its activity lines say how far each call took it; the steps are in the checklist.
    calls = page.locator(".tool-line .call")
    expect(calls).to_have_text([f"update_plan({n} of 5 done)" for n in (0, 1, 2)])
    screenshot(page, "plan-live")
    gates[2].set()
    expect(page.locator(".bubble.assistant")).to_have_text("Step three is next; say go on.")
    expect(page.locator("rojo-chat-panel .busy")).to_be_hidden()

    page.get_by_label("Message").fill("Go on")
    page.keyboard.press("Enter")
    second = page.locator(".turn-plan").nth(1)
    expect(second).to_contain_text("from the last turn")  # held: no call of this turn yet
    expect_checklist(second, 2)
    for done in (3, 4, 5):
        gates[done].set()
        expect_checklist(second, done)
    expect(page.locator(".bubble.assistant").nth(1)).to_have_text("All five done.")
    expect(second).not_to_contain_text("from the last turn")
    # The model was asked for a plan, and the second turn's requests carry the last one.
    first_system = fake_provider.requests[0]["messages"][0]["content"]
    assert "update_plan tool" in first_system and "Your plan" not in first_system
    system = fake_provider.requests[4]["messages"][0]["content"]
    assert "- [x] Read the outline\n- [x] Write <b>the intro</b>\n" in system
    assert "- [~] Write the body (in progress)\n- [ ] Check the links\n" in system

    page.reload()  # replayed from the stored calls
    boxes = page.locator(".turn-plan")
    expect(boxes).to_have_count(2)
    expect_checklist(boxes.nth(0), 2)
    expect_checklist(boxes.nth(1), 5)

    links = page.locator(".export-links")
    with page.expect_download() as download:
        links.get_by_role("link", name="Markdown").click()
    text = Path(download.value.path()).read_text()
    assert "**Plan**\n\n- [x] Read the outline\n- [x] Write <b>the intro</b>\n" in text
    assert "- [x] Sum up\n" in text
    assert "update_plan" not in text  # the checklist stands for its calls
    with page.expect_download() as download:
        links.get_by_role("link", name="JSON").click()
    exported = json.loads(Path(download.value.path()).read_text())
    assert exported["plan"] == plan(5)["plan"]


def forming_plan_reply(done: int, cut_after: int, before: threading.Event, middle: threading.Event):
    """An update_plan call held before it starts, and again in its arguments just after the
    step numbered `cut_after` (its status included) arrived."""
    args = json.dumps(plan(done))
    cut = 0
    for _ in range(cut_after):
        cut = args.index("}", cut) + 1
    head = {"index": 0, "id": "call_forming", "type": "function"}
    first = chunk(
        {"role": "assistant", "tool_calls": [{**head, "function": {"name": "update_plan"}}]}
    )

    def part(text: str):
        return chunk({"tool_calls": [{"index": 0, "function": {"arguments": text}}]})

    return stream(
        Gate(before), first, part(args[:cut]), Gate(middle), part(args[cut:]),
        chunk({}, "tool_calls"),
    )  # fmt: skip


def test_a_plan_call_still_being_written_redraws_the_checklist(
    page_for, users, project, fake_provider, settings
):
    """Held in the middle of an update_plan call's arguments, the checklist already shows
    the steps that arrived over the plan before, marked as changing; the whole call then
    settles it."""
    settings.ROJO_TOOL_DELTA_SECONDS = 0.1
    project_root_create(project.pk)
    make_rojo(fake_provider.base_url, approval_tools=[], tools=NEW_ROJO_TOOLS)
    before, middle = threading.Event(), threading.Event()
    fake_provider.add(
        plan_reply(0),
        forming_plan_reply(2, 2, before, middle),
        stream(*text_chunks("Two done.")),
    )
    page = page_for(users["editor"])
    page.goto(f"/projects/{project.pk}/")
    page.get_by_label("Message").fill("Write the report")
    page.keyboard.press("Enter")
    box = page.locator(".turn-plan")
    expect_checklist(box, 0)

    before.set()  # the call forms up to its second step, and waits there
    expect(box).to_have_class("turn-plan live updating")
    expect(box.locator(".turn-plan-head")).to_contain_text("2 of 5 done")
    statuses = ["done", "done", "pending", "pending", "pending"]  # the rest: the plan before
    for item, status in zip(box.locator(".turn-plan-step").all(), statuses, strict=True):
        expect(item).to_have_attribute("data-status", status)
    screenshot(page, "plan-forming")

    middle.set()
    expect_checklist(box, 2)
    expect(page.locator(".bubble.assistant")).to_have_text("Two done.")
    expect(box).to_have_class("turn-plan")


def test_a_turn_followed_again_after_a_reload_ends_with_one_edit_under_its_message(
    page_for, users, project, fake_provider
):
    """A reload mid-turn draws the message's Edit before the plan comes between it and the
    message; the end of the turn left a second Edit under the plan."""
    project_root_create(project.pk)
    make_rojo(fake_provider.base_url, tools=NEW_ROJO_TOOLS)
    gate = threading.Event()
    fake_provider.add(
        plan_reply(1),
        stream(*text_chunks("Half way", finish=None), Gate(gate), *text_chunks(" and done.")),
    )
    page = page_for(users["editor"])
    page.goto(f"/projects/{project.pk}/")
    page.get_by_label("Message").fill("Write the page.")
    page.keyboard.press("Enter")
    panel = page.locator("rojo-chat-panel")
    expect(panel.locator(".bubble.assistant")).to_have_text("Half way")
    page.reload()
    expect(panel.locator(".bubble.assistant")).to_have_text("Half way")
    expect_checklist(panel.locator(".turn-plan"), 1)
    gate.set()

    expect(panel.locator(".bubble.assistant")).to_have_text("Half way and done.")
    expect(panel.locator(".busy")).to_be_hidden()
    expect(panel.get_by_role("button", name="Edit and send again")).to_have_count(1)
    expect(panel.locator(".bubble.user + .message-tools + .turn-plan")).to_have_count(1)
