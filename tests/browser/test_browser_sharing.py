"""Copy link in Chromium: the author copies a conversation's read-only link, another member
opens it in a browser of their own and reads it as it was (Markdown, tool activity), with
nothing to write, stop, approve, undo or branch; a reply that runs is watched live; markup in
a message stays text; an outsider gets a 404."""

import threading

import pytest
from playwright.sync_api import expect

from rojos.models import Conversation
from tests.support.browser import screenshot
from tests.support.fake_provider import Gate, stream, text_chunks, tool_call_chunks
from tests.support.helpers import make_rojo

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

XSS = '<img src=x onerror="window.pwned=1">'
ASKED = f"Write the notes {XSS}"
REPLY = f"Wrote **notes.md** for you.\n\n- one\n- two\n\n{XSS}"


def copied_link(page) -> str:
    """Click Copy link and return what the clipboard holds (the page shows it too)."""
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    page.get_by_role("button", name="Copy link").click()
    expect(page.get_by_role("button", name="Link copied")).to_be_visible()
    link = page.evaluate("navigator.clipboard.readText()")
    expect(page.locator(".shared-url")).to_have_text(link)
    return link


def assert_read_only(page) -> None:
    """Nothing on the page sends, stops, approves, undoes, branches, renames or deletes."""
    expect(page.locator(".composer")).to_be_hidden()
    expect(page.get_by_role("button", name="Send")).to_have_count(0)  # hidden, inert: no role
    for selector in ("button.undo", ".message-tools", ".turn-actions", ".approval-actions"):
        expect(page.locator(selector)).to_have_count(0)
    expect(page.locator(".conversation-actions")).to_have_count(0)
    assert not page.evaluate("Boolean(window.pwned)")
    assert page.locator(".messages img").count() == 0


def test_copy_link_opens_the_conversation_read_only_for_another_member(
    page_for, users, project, fake_provider
):
    make_rojo(fake_provider.base_url)
    fake_provider.add(
        stream(*tool_call_chunks([("write_text_content", {"path": "notes.md", "text": "# N\n"})])),
        stream(*text_chunks(REPLY)),
    )
    author = page_for(users["editor"])
    author.goto(f"/projects/{project.pk}/")
    author.get_by_label("Message").fill(ASKED)
    author.keyboard.press("Enter")
    expect(author.locator(".bubble.assistant strong")).to_have_text("notes.md")
    expect(author.locator("button.undo").first).to_be_visible()  # the author's own controls
    conversation = Conversation.objects.get()
    link = copied_link(author)
    assert link.endswith(f"/projects/{project.pk}/c/{conversation.pk}/read/")

    reader = page_for(users["viewer"])
    reader.goto(link)
    log = reader.locator(".messages")
    expect(log.locator(".bubble.user")).to_have_text(ASKED)  # the markup as text
    expect(log.locator(".bubble.assistant strong")).to_have_text("notes.md")
    expect(log.locator(".bubble.assistant li")).to_have_text(["one", "two"])
    expect(log.locator(".bubble.assistant")).to_contain_text(XSS)  # raw HTML stays text
    expect(log.locator(".tool-line")).to_contain_text('write_text_content("notes.md", …) → ok')
    expect(reader.locator(".read-title")).to_have_text(conversation.title)
    expect(reader.locator(".read-author")).to_have_text("editor")
    assert_read_only(reader)
    screenshot(reader, "shared-conversation")
    screenshot(author, "shared-copy-link")
    assert reader.dialogs == [] and reader.console_errors == []

    outsider = page_for(users["outsider"])
    assert outsider.goto(link).status == 404


def test_a_member_watches_a_running_reply_live(page_for, users, project, fake_provider):
    """Opened while the reply streams, the link shows it arriving, then the whole of it. The
    reply holds half-way until the reader's page joined it."""
    make_rojo(fake_provider.base_url)
    words = " ".join(f"word{i}" for i in range(60))
    joined = threading.Event()
    chunks = text_chunks(words, pieces=60)
    fake_provider.add(stream(*chunks[:30], Gate(joined), *chunks[30:], delay=0.08))
    author = page_for(users["editor"])
    author.goto(f"/projects/{project.pk}/")
    author.get_by_label("Message").fill("Count slowly")
    author.keyboard.press("Enter")
    expect(author.locator(".bubble.assistant")).to_contain_text("word3")
    link = copied_link(author)

    reader = page_for(users["owner"])
    reader.goto(link)
    expect(reader.locator(".busy")).to_be_visible()  # joined while it runs
    joined.set()
    expect(reader.locator(".bubble.assistant")).to_have_text(words)
    expect(reader.locator(".busy")).to_be_hidden()
    expect(reader.locator(".stop")).to_be_hidden()
    assert_read_only(reader)
    assert reader.console_errors == []
