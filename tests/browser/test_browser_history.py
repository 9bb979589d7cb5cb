"""Stored history in a real browser: rendered from the server's events by the live handler."""

import re

import pytest
from playwright.sync_api import expect

from roject.storage import project_root_create
from rojos.models import Conversation
from tests.support.browser import screenshot
from tests.support.fake_provider import stream, text_chunks, tool_call_chunks
from tests.support.helpers import make_rojo

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

NOTES = '{"title": "Notes"}\n'  # text that looks like JSON: a text result all the same
SUMMARY = "notes.txt names its **title**; I wrote it to `title.txt`:\n\n- one line\n- no more"


def log_snapshot(page) -> dict:
    """The log as a reader and a screen reader get it: each item's class and text, and the
    whole markup (attributes included) to catch any other difference."""
    return page.locator("rojo-chat-panel .messages").evaluate(
        """log => ({
            items: [...log.children].map(node => [node.className, node.textContent]),
            html: log.innerHTML,
        })"""
    )


def test_a_reopened_conversation_renders_exactly_as_it_did_live(
    page_for, users, project, fake_provider
):
    """Text, a text-result call and a JSON-result call (with its Undo), then a failed call:
    reopened, the log is the same DOM; replaying it refreshes no files, moves no list entry
    and takes no focus."""
    make_rojo(fake_provider.base_url)
    (project_root_create(project.pk) / "notes.txt").write_text(NOTES)
    fake_provider.add(
        stream(*tool_call_chunks([("get_text_content", {"path": "notes.txt"})])),
        stream(*tool_call_chunks([("write_text_content", {"path": "title.txt", "text": "N\n"})])),
        stream(*text_chunks(SUMMARY, pieces=8), delay=0.01),
        stream(*tool_call_chunks([("get_text_content", {"path": "missing.txt"})])),
        stream(*text_chunks("There is no missing.txt.")),
    )
    page = page_for(users["editor"])
    page.goto(f"/projects/{project.pk}/")
    panel = page.locator("rojo-chat-panel")
    for question in ("Read notes.txt and copy its title.", "And missing.txt?"):
        page.get_by_label("Message").fill(question)
        page.keyboard.press("Enter")
        expect(panel.locator(".bubble.assistant").last).not_to_have_attribute("aria-busy", "true")
        expect(panel.locator(".busy")).to_be_hidden()
    expect(panel.locator(".bubble.assistant")).to_have_count(2)
    live = log_snapshot(page)
    screenshot(page, "history-live")
    assert [name for name, _ in live["items"]] == [
        "bubble user",
        "message-tools",
        "tool-line ok",
        "tool-line ok",
        "undo",  # the write's Undo, under its line
        "bubble assistant",
        "undo undo-turn",
        "bubble user",
        "message-tools",
        "tool-line error",
        "bubble assistant",
        "turn-actions",
    ]
    conversation = Conversation.objects.get()
    Conversation.objects.create(project=project, title="A newer one")  # listed first now

    reopened = page_for(users["editor"])
    listings = []
    reopened.on(
        "request",
        lambda request: listings.append(request.url) if "/files?" in request.url else None,
    )
    reopened.goto(f"/projects/{project.pk}/c/{conversation.pk}/")
    shown = reopened.locator("rojo-chat-panel")
    expect(shown.locator(".bubble.assistant")).to_have_count(2)
    expect(shown.locator(".bubble.assistant strong")).to_have_text("title")
    reopened.wait_for_timeout(300)  # any refresh a replayed write asked for would be sent

    assert log_snapshot(reopened) == live
    assert len(listings) == 1, listings  # the page's own listing, none per stored write
    expect(reopened.locator(".conversation-list li").first).to_contain_text("A newer one")
    expect(reopened.locator(".conversation-list li[aria-current] a")).to_have_text(
        conversation.title
    )
    expect(reopened.get_by_label("Message")).not_to_be_focused()
    expect(shown.locator("[aria-busy]")).to_have_count(0)
    expect(shown.locator(".tool-line summary").nth(0)).to_have_text(
        re.compile(r'get_text_content\("notes\.txt"\) → ok$')
    )
    screenshot(reopened, "history-reopened")
    assert reopened.console_errors == []


def test_a_partly_undone_turn_reopens_with_undo_for_what_is_left(
    page_for, users, project, fake_provider
):
    """Undone calls come back marked from the stored changes; the turn's Undo undoes the rest."""
    root = project_root_create(project.pk)
    make_rojo(fake_provider.base_url, approval_tools=[])
    fake_provider.add(
        stream(*tool_call_chunks([("write_text_content", {"path": "a.txt", "text": "A\n"})])),
        stream(*tool_call_chunks([("write_text_content", {"path": "b.txt", "text": "B\n"})])),
        stream(*text_chunks("Both written.")),
    )
    page = page_for(users["editor"])
    page.goto(f"/projects/{project.pk}/")
    page.get_by_label("Message").fill("Write a.txt and b.txt")
    page.keyboard.press("Enter")
    expect(page.locator(".bubble.assistant")).to_have_text("Both written.")
    # The turn's DONE comes after it gave the conversation up: an undo before it is refused.
    expect(page.get_by_role("button", name="Undo this turn")).to_be_visible()
    page.locator(".tool-line + button.undo").first.click()
    expect(page.locator(".tool-line").nth(0)).to_contain_text("(undone)")

    reopened = page_for(users["editor"])
    reopened.goto(f"/projects/{project.pk}/c/{Conversation.objects.get().pk}/")
    lines = reopened.locator(".tool-line")
    expect(lines.nth(0)).to_have_class(re.compile(r"\bundone\b"))
    expect(lines.nth(0)).to_contain_text("→ ok (undone)")
    expect(lines.nth(1)).not_to_have_class(re.compile(r"\bundone\b"))
    expect(reopened.locator(".tool-line + button.undo")).to_have_count(1)
    reopened.get_by_role("button", name="Undo this turn").click()
    confirm = reopened.get_by_role("group", name="Undo this turn?")
    expect(confirm.locator("li")).to_have_text(["b.txt"])  # a.txt is back already
    confirm.get_by_role("button", name="Undo these changes").click()

    expect(lines.nth(1)).to_contain_text("(undone)")
    expect(reopened.get_by_role("button", name="Undo this turn")).to_have_count(0)
    assert not (root / "a.txt").exists() and not (root / "b.txt").exists()
    assert reopened.console_errors == []


def test_a_provider_error_after_the_finished_reply_shows_as_a_notice_live_and_reopened(
    page_for, users, project, fake_provider
):
    """The provider sends an error after the reply's finish reason: the reply shows whole,
    and under it a notice in the provider's words (a status, not an alert: the turn went
    on); reopened, the log is the same."""
    make_rojo(fake_provider.base_url)
    late = {"error": {"message": "Usage accounting is unavailable.", "code": 500}}
    fake_provider.add(stream(*text_chunks("The answer is 42."), late))
    page = page_for(users["editor"])
    page.goto(f"/projects/{project.pk}/")
    panel = page.locator("rojo-chat-panel")
    page.get_by_label("Message").fill("What is the answer?")
    page.keyboard.press("Enter")
    expect(panel.locator(".busy")).to_be_hidden()
    expect(panel.locator(".bubble.assistant")).to_have_text(["The answer is 42."])
    notice = panel.locator(".chat-notice.late_error")
    expect(notice).to_have_attribute("role", "status")
    expect(notice).to_contain_text("Usage accounting is unavailable.")
    expect(panel.locator(".chat-error")).to_have_count(0)
    live = log_snapshot(page)
    names = [name for name, _ in live["items"]]
    assert names.index("chat-notice late_error") == names.index("bubble assistant") + 1, names
    screenshot(page, "history-late-error-notice")

    reopened = page_for(users["editor"])
    reopened.goto(f"/projects/{project.pk}/c/{Conversation.objects.get().pk}/")
    expect(reopened.locator("rojo-chat-panel .chat-notice")).to_have_count(1)
    assert log_snapshot(reopened) == live
    assert page.console_errors == [] and reopened.console_errors == []
