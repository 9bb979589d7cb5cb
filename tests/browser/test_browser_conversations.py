"""The conversation list in Chromium: full titles, author, badges, rename, delete, older
pages and search, as a person sees and uses them."""

import re
import threading

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from rojos.models import Conversation, Message, TurnRecord
from tests.support.browser import screenshot
from tests.support.fake_provider import Gate, stream, text_chunks
from tests.support.helpers import make_rojo

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LONG_TITLE = "Rewrite the install guide for Debian and Fedora"  # 47: twice the old cut


def many_conversations(project, user, count: int) -> list[Conversation]:
    """`count` conversations, one user message each, the first the most recent."""
    now = timezone.now()
    rows = Conversation.objects.bulk_create(
        Conversation(project=project, user=user, title=f"Topic {i}", updated=now)
        for i in range(count)
    )
    Message.objects.bulk_create(
        Message(conversation=c, position=0, role="user", content=f"About topic {i}")
        for i, c in enumerate(rows)
    )
    for i, c in enumerate(rows):
        Conversation.objects.filter(pk=c.pk).update(updated=now - timezone.timedelta(minutes=i))
    return rows


def test_the_list_shows_full_titles_authors_badges_and_pages(page_for, users, project):
    """A long title shows whole (two lines, all of it on hover) with its author and time; a
    failed turn's badge shows; 50 rows come first, the rest with "Older conversations"."""
    rows = many_conversations(project, users["editor"], 59)
    long = Conversation.objects.create(project=project, user=users["owner"], title=LONG_TITLE)
    asked = Message.objects.create(conversation=long, position=0, role="user", content="Go")
    TurnRecord.objects.create(conversation=long, user_message=asked, status="error", error="x")

    page = page_for(users["viewer"])
    page.goto(f"/projects/{project.pk}/")
    items = page.locator(".conversation-list li")
    expect(items).to_have_count(50)
    first = items.first
    expect(first.locator(".conversation-title")).to_have_text(LONG_TITLE)
    expect(first.locator("a")).to_have_attribute("title", LONG_TITLE)
    cut = first.locator(".conversation-title").evaluate("e => e.scrollHeight > e.clientHeight + 1")
    assert not cut, "the title is cut"
    expect(first.locator(".conversation-author")).to_have_text("owner")
    expect(first.locator(".badge")).to_have_text("Failed")
    expect(items.nth(1).locator(".conversation-author")).to_have_text("editor")
    expect(first.locator(".conversation-actions")).to_have_count(0)  # a viewer's list
    screenshot(page, "conversations-list")

    page.get_by_role("button", name="Older conversations").click()
    expect(items).to_have_count(60)
    expect(items.last.locator(".conversation-title")).to_have_text(rows[-1].title)
    expect(page.get_by_role("button", name="Older conversations")).to_be_hidden()
    assert page.console_errors == []


def test_an_editor_renames_and_deletes_with_a_confirmation(page_for, users, project):
    """Rename in place with Enter; Delete asks first, saying the files stay, then removes
    the row and the conversation."""
    keep, drop = many_conversations(project, users["viewer"], 2)
    page = page_for(users["editor"])
    page.goto(f"/projects/{project.pk}/")
    row = page.locator(f'.conversation-list li[data-id="{keep.pk}"]')
    row.hover()
    row.get_by_role("button", name="Rename this conversation").click()
    box = row.get_by_label("New title")
    box.fill("Release notes for 2.0")
    box.press("Enter")
    expect(row.locator(".conversation-title")).to_have_text("Release notes for 2.0")
    expect(row.locator("a")).to_have_attribute("title", "Release notes for 2.0")
    expect(row.get_by_label("New title")).to_have_count(0)
    keep.refresh_from_db()
    assert keep.title == "Release notes for 2.0"
    assert page.dialogs == [], "a rename that worked said it failed"

    other = page.locator(f'.conversation-list li[data-id="{drop.pk}"]')
    other.hover()
    other.get_by_role("button", name="Delete this conversation").click()
    confirm = other.get_by_role("alertdialog")
    expect(confirm).to_contain_text("The files it changed stay as they are.")
    screenshot(page, "conversations-delete-confirm")
    confirm.get_by_role("button", name="Cancel").click()
    expect(other).to_be_visible()
    assert Conversation.objects.filter(pk=drop.pk).exists()
    other.hover()
    other.get_by_role("button", name="Delete this conversation").click()
    other.get_by_role("alertdialog").get_by_role("button", name="Delete").click()
    expect(page.locator(f'.conversation-list li[data-id="{drop.pk}"]')).to_have_count(0)
    assert not Conversation.objects.filter(pk=drop.pk).exists()

    page.reload()
    expect(page.locator(".conversation-list li")).to_have_count(1)
    expect(page.locator(".conversation-list .conversation-title")).to_have_text(
        "Release notes for 2.0"
    )
    assert page.console_errors == []


def test_a_pinned_conversation_goes_first_and_stays_there(page_for, users, project):
    """Pin the oldest of three: it heads the list, marked, after a reload too; unpinned,
    its mark goes."""
    *_, oldest = many_conversations(project, users["owner"], 3)
    page = page_for(users["owner"])
    page.goto(f"/projects/{project.pk}/")
    row = page.locator(f'.conversation-list li[data-id="{oldest.pk}"]')
    row.hover()
    row.get_by_role("button", name="Pin this conversation").click()
    titles = page.locator(".conversation-list .conversation-title")
    expect(titles.first).to_have_text(oldest.title)
    expect(row).to_have_attribute("data-pinned", "true")
    page.reload()
    expect(titles).to_have_text([oldest.title, "Topic 0", "Topic 1"])
    screenshot(page, "conversations-pinned")
    row.hover()
    row.get_by_role("button", name="Unpin this conversation").click()
    expect(row).not_to_have_attribute("data-pinned", "true")
    oldest.refresh_from_db()
    assert oldest.pinned is False
    assert page.console_errors == []


def test_search_finds_a_reply_and_opens_the_conversation_at_it(page_for, users, project):
    """Typing a word of a reply lists the conversation with a snippet; opening it scrolls to
    that reply and highlights it, far down a long conversation."""
    many_conversations(project, users["owner"], 3)
    target = Conversation.objects.create(project=project, user=users["owner"], title="Long one")
    position = 0
    for turn in range(30):
        for role, text in (("user", f"Question {turn}"), ("assistant", f"Answer {turn}.")):
            if turn == 25 and role == "assistant":
                text = "The **marmalade** recipe lives in docs/kitchen.md."
            Message.objects.create(conversation=target, position=position, role=role, content=text)
            position += 1

    page = page_for(users["viewer"])
    page.goto(f"/projects/{project.pk}/")
    page.get_by_label("Search the conversations of your projects").fill("marma")
    hit = page.locator(".search-results li")
    expect(hit).to_have_count(1)
    expect(hit.locator(".conversation-title")).to_have_text("Long one")
    expect(hit.locator(".search-snippet")).to_contain_text("marmalade")
    expect(page.locator(".conversation-list")).to_be_hidden()
    screenshot(page, "conversations-search")
    hit.locator("a").click()

    found = page.locator(".bubble.search-hit")
    expect(found).to_contain_text("The marmalade recipe lives in docs/kitchen.md.")
    expect(found).to_be_in_viewport()
    expect(page.locator(".bubble.assistant").first).not_to_be_in_viewport()
    screenshot(page, "conversations-search-opened")

    page.get_by_label("Search the conversations of your projects").fill("nothingsuch")
    expect(page.locator(".search-results")).to_contain_text("Nothing found.")
    page.get_by_label("Search the conversations of your projects").press("Escape")
    expect(page.locator(".conversation-list")).to_be_visible()
    assert page.console_errors == []


def test_another_members_running_reply_shows_a_live_badge(
    page_for, client_for, users, project, fake_provider
):
    """While the editor's reply runs, the viewer's list shows it Running, a new
    conversation included; the badge goes once the reply is done. The reply holds half-way
    until the badge was seen, so a slow page cannot miss the running reply."""
    rojo = make_rojo(fake_provider.base_url)
    many_conversations(project, users["owner"], 1)
    page = page_for(users["viewer"])
    page.goto(f"/projects/{project.pk}/")
    seen = threading.Event()
    chunks = text_chunks("w " * 60, pieces=60)
    fake_provider.add(stream(*chunks[:30], Gate(seen), *chunks[30:], delay=0.1))
    client = client_for(users["editor"])
    chat = threading.Thread(
        target=client.chat, args=(project.pk,), kwargs={"rojo": rojo.pk, "message": "Slow one"}
    )
    chat.start()
    try:
        row = page.locator(".conversation-list li", has_text="Slow one")
        expect(row.locator(".badge")).to_have_text("Running", timeout=10_000)
        expect(row.locator(".conversation-author")).to_have_text("editor")
        screenshot(page, "conversations-running-badge")
    finally:
        seen.set()
        chat.join()
    expect(row.locator(".badge")).to_have_count(0, timeout=10_000)
    expect(page.locator(".conversation-list li").first).to_have_attribute(
        "data-status", re.compile("^$")
    )
    assert page.console_errors == []
