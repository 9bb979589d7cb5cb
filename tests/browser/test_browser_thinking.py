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
from rojos.models.capabilities import CLOSING_THINK_TAG as CLOSING
from tests.support.browser import screenshot
from tests.support.fake_provider import (
    MODEL,
    REASONING_SHAPES,
    Gate,
    chunk,
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


# The first count a live thinking line shows on the page, recorded as the line appears (a
# MutationObserver runs before the page's one-second tick can move it on).
FIRST_COUNT = """
window.__firstCount = null;
new MutationObserver(() => {
    const label = document.querySelector('.thinking[data-live] .thinking-label');
    if (window.__firstCount === null && label && label.textContent) {
        window.__firstCount = label.textContent;
    }
}).observe(document, { subtree: true, childList: true, characterData: true });
"""
COUNTED = re.compile(r"^Thinking… (\d+) s$")


def first_count(page) -> int:
    """The seconds the page's live thinking line said when it first appeared."""
    page.wait_for_function("() => window.__firstCount !== null")
    return int(COUNTED.match(page.evaluate("() => window.__firstCount"))[1])


def test_a_reload_or_another_tab_counts_the_thinking_from_when_it_began(
    page_for, users, project, fake_provider
):
    """A page that joins a turn mid-thought (reloaded, or opened in another tab) replays its
    thinking from the turn's log: the line goes on counting from when the thinking began,
    as the server measured it, and does not start again from 0 s."""
    project_root_create(project.pk)
    make_rojo(fake_provider.base_url)
    held = threading.Event()
    fake_provider.add(
        stream(
            *reasoning_chunks(PIECES[:2], "reasoning_content"),
            Gate(held, timeout=120),
            text_chunks("Thought it through."),
        )
    )
    page = page_for(users["editor"])
    page.add_init_script(FIRST_COUNT)
    page.goto(f"/projects/{project.pk}/")
    page.get_by_label("Message").fill("Think first.")
    page.get_by_label("Message").press("Enter")
    label = page.locator(".thinking[data-live] summary")
    # The page's own count says the thinking has gone on for 4 s or more: the reply is held.
    expect(label).to_have_text(re.compile(r"^Thinking… ([4-9]|\d\d+) s$"))
    expect(page).to_have_url(re.compile(rf"/projects/{project.pk}/c/\d+/$"))
    conversation = page.url

    page.reload()
    expect(page.locator(".thinking[data-live] .thinking-text")).to_have_text("".join(PIECES[:2]))
    assert first_count(page) >= 4
    other = page_for(users["editor"])
    other.add_init_script(FIRST_COUNT)
    other.goto(conversation)
    expect(other.locator(".thinking[data-live] .thinking-text")).to_have_text("".join(PIECES[:2]))
    assert first_count(other) >= 4

    held.set()
    for shown in (page, other):
        expect(shown.locator(".bubble.assistant")).to_have_text("Thought it through.")
        folded = shown.locator(".thinking summary")
        expect(folded).to_have_text(re.compile(r"^Thought for ([4-9]|\d\d+) s$"))
        assert shown.console_errors == []


def test_a_reply_that_never_closes_its_think_tag_shows_once_as_the_reply(
    page_for, users, project, fake_provider
):
    """A model whose thinking opens in its prompt (the self-test's "closing think tag")
    streams what looks like thinking until `</think>` comes. When the reply ends without
    one, that text was its answer: the live page takes the thinking line back and shows the
    text once, as the reply, as the stored reply does after a reload."""
    profile = {"results": {"reasoning": {"status": "works", "detail": {"shape": CLOSING}}}}
    make_rojo(fake_provider.base_url, capability_profiles={MODEL: profile})
    held = threading.Event()
    reply = "Hello! Nothing to think about here."
    fake_provider.add(stream(*text_chunks(reply, 2, finish=None), Gate(held), chunk({}, "stop")))
    page = page_for(users["editor"])
    page.goto(f"/projects/{project.pk}/")
    page.get_by_label("Message").fill("Say hello.")
    page.get_by_label("Message").press("Enter")
    # Until the reply ends, nothing tells its answer from thinking: it shows as thinking.
    expect(page.locator(".thinking[data-live] .thinking-text")).to_have_text(reply)

    held.set()
    for reloaded in (False, True):  # live, then from what was stored
        if reloaded:
            page.reload()
        expect(page.locator(".bubble.assistant")).to_have_text(reply)
        expect(page.locator(".thinking")).to_have_count(0)
        expect(page.get_by_text("Nothing to think about")).to_have_count(1)
    assert page.console_errors == []
