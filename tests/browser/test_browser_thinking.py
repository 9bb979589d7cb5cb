"""Visible thinking in Chromium, in each of the three shapes providers stream it: a collapsed
"Thinking… N s" line that grows as each piece arrives (each is on the page before the
provider sends the next: no piece waits for another), opens to the text, folds as "Thought
for N s" when the answer starts, and is there after a reload, mid-thought or after the
turn; the request after the tool call carries the thinking or not, as that provider needs."""

import re
import threading

import pytest
from playwright.sync_api import expect

from roject.storage import project_root_create
from rojos.models import Message
from tests.support.browser import screenshot
from tests.support.fake_provider import (
    REASONING_SHAPES,
    Gate,
    reasoning_chunks,
    stream,
    text_chunks,
    tool_call_chunks,
)
from tests.support.helpers import make_rojo

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PIECES = [f"Step {n}: the <b>user</b> wants the root listed. " for n in range(1, 11)]
FIELDS = ("reasoning_content", "reasoning")
# Where the reply's reasoning goes back within the tool loop, by shape (docs/providers.md).
SENT_BACK = {"reasoning": "reasoning", "reasoning_content": "reasoning_content", "think": None}


def gated_thinking(shape: str) -> tuple[list[threading.Event], object]:
    """A step that thinks in ten pieces, each held until the test opens its gate, then lists
    the root; and the gates."""
    gates = [threading.Event() for _ in PIECES]
    chunks: list = []
    for group, gate in zip(reasoning_chunks(PIECES, shape), gates, strict=True):
        chunks += [*group, Gate(gate)]
    return gates, stream(*chunks, tool_call_chunks([("list_files", {"path": ""})]))


@pytest.mark.parametrize("shape", REASONING_SHAPES)
def test_thinking_grows_live_folds_at_the_answer_and_stays_after_a_reload(
    page_for, users, project, fake_provider, shape
):
    project_root_create(project.pk)
    make_rojo(fake_provider.base_url)
    gates, thinking = gated_thinking(shape)
    fake_provider.add(thinking, stream(*text_chunks("The root is empty.")))
    page = page_for(users["editor"])
    page.goto(f"/projects/{project.pk}/")
    page.get_by_label("Message").fill("What is in the root?")
    page.get_by_label("Message").press("Enter")

    live = page.locator(".thinking[data-live]")
    text = live.locator(".thinking-text")
    for n, gate in enumerate(gates):
        expect(text).to_have_text("".join(PIECES[: n + 1]))  # before the next is sent
        if n == 0:
            expect(live).not_to_have_attribute("open", "")  # collapsed by default
            expect(live.locator("summary")).to_have_text(re.compile(r"^Thinking… \d+ s$"))
            expect(text).to_be_hidden()
        if n == 4:  # reloaded mid-thought, the page follows the turn again from its log
            page.reload()
            expect(text).to_have_text("".join(PIECES[: n + 1]))
        if n == len(gates) - 2:  # the line counts the seconds while it thinks
            expect(live.locator("summary")).to_have_text(re.compile(r"^Thinking… [1-9]\d* s$"))
            live.locator("summary").click()  # one click away
            expect(text).to_be_visible()
            expect(text).to_contain_text("<b>user</b>")  # as text, not markup
            screenshot(page, f"thinking-live-{shape}")
        gate.set()

    expect(page.locator(".bubble.assistant")).to_have_text("The root is empty.")
    line = page.locator(".thinking")
    expect(line).to_have_count(1)
    expect(live).to_have_count(0)
    expect(line).not_to_have_attribute("open", "")  # folded at the answer, though opened
    expect(line.locator("summary")).to_have_text(re.compile(r"^Thought for \d+ s$"))
    expect(page.locator(".bubble.assistant")).not_to_contain_text("think")
    assert page.locator(".thinking b").count() == 0

    page.reload()
    line = page.locator(".thinking")
    expect(line).to_have_count(1)
    expect(line.locator("summary")).to_have_text(re.compile(r"^Thought for \d+ s$"))
    line.locator("summary").click()
    expect(line.locator(".thinking-text")).to_have_text("".join(PIECES))
    expect(page.locator(".bubble.assistant")).to_have_text("The root is empty.")
    screenshot(page, f"thinking-reloaded-{shape}")
    assert page.console_errors == []

    stored = Message.objects.get(role="assistant", tool_calls__isnull=False)
    assert stored.reasoning == "".join(PIECES)
    after_call = fake_provider.requests[1]["messages"]
    sent = [(m["role"], f) for m in after_call for f in FIELDS if f in m]
    field = SENT_BACK[shape]
    assert sent == ([("assistant", field)] if field else [])
