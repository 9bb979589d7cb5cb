"""The window, usage and budgets in a real browser: each reply's tokens and cost under it,
the conversation's total and the window meter, a summary as a collapsed line, a budget's
refusal in the chat."""

import re
from decimal import Decimal

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from rojos.models import Conversation, Message, UsageRecord
from tests.support.browser import screenshot
from tests.support.fake_provider import stream, text_chunks, usage_chunk
from tests.support.helpers import make_rojo

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def after_text(locator) -> str:
    """What CSS draws after an element (the reply's figures), as the reader sees it."""
    return locator.evaluate("node => getComputedStyle(node, '::after').content")


def test_each_reply_shows_its_tokens_and_cost_and_the_header_the_total_and_the_window(
    page_for, users, project, fake_provider
):
    make_rojo(
        fake_provider.base_url,
        context_window=12_000,
        price_input=Decimal("2"),
        price_output=Decimal("8"),
    )
    fake_provider.add(
        stream(*text_chunks("First answer."), usage_chunk(1_500, 20)),
        stream(*text_chunks("Second answer."), usage_chunk(1_600, 30)),
    )
    page = page_for(users["editor"])
    page.goto(f"/projects/{project.pk}/")
    panel = page.locator("rojo-chat-panel")
    for question in ("One?", "Two?"):
        page.get_by_label("Message").fill(question)
        page.keyboard.press("Enter")
        expect(panel.locator(".busy")).to_be_hidden()

    replies = panel.locator(".bubble.assistant")
    expect(replies.nth(1)).to_have_attribute("data-usage", "1,600 tokens in · 30 out · $0.0034")
    expect(replies.nth(0)).to_have_attribute("data-usage", "1,500 tokens in · 20 out · $0.0032")
    expect(replies.nth(0)).to_have_text("First answer.")  # the figures are not the reply's text
    assert "1,500 tokens in" in after_text(replies.nth(0))
    total = page.locator(".usage-total")
    expect(total).to_have_text("This conversation: 3,100 tokens in · 50 out · $0.0066")
    expect(page.locator(".context-meter")).to_be_visible()
    expect(page.locator(".context-text")).to_contain_text("of 12,000 tokens")
    screenshot(page, "window-usage")

    reopened = page_for(users["editor"])
    reopened.goto(f"/projects/{project.pk}/c/{Conversation.objects.get().pk}/")
    shown = reopened.locator("rojo-chat-panel .bubble.assistant")
    expect(shown.nth(0)).to_have_attribute("data-usage", "1,500 tokens in · 20 out · $0.0032")
    expect(reopened.locator(".usage-total")).to_have_text(total.text_content())
    assert page.console_errors == [] and reopened.console_errors == []


def test_a_replys_hover_shows_its_time_and_its_usage_together(
    page_for, users, project, fake_provider
):
    """The time the pointer brings up joins the reply's usage details in one tooltip: the
    first hover used to replace them, so they never showed."""
    make_rojo(fake_provider.base_url)
    fake_provider.add(stream(*text_chunks("An answer."), usage_chunk(1_500, 20)))
    page = page_for(users["editor"])
    page.goto(f"/projects/{project.pk}/")
    panel = page.locator("rojo-chat-panel")
    page.get_by_label("Message").fill("One?")
    page.keyboard.press("Enter")
    reply = panel.locator(".bubble.assistant")
    expect(reply).to_have_attribute("data-usage", re.compile("1,500 tokens in"))
    expect(reply).to_have_attribute("title", re.compile("This reply: 1 model call"))
    reply.hover()
    expect(reply).to_have_attribute("data-time", re.compile(r"\d"))
    year = str(timezone.now().year)
    expect(reply).to_have_attribute("title", re.compile(f"{year}.*\nThis reply: 1 model call"))

    reopened = page_for(users["editor"])
    reopened.goto(f"/projects/{project.pk}/c/{Conversation.objects.get().pk}/")
    shown = reopened.locator("rojo-chat-panel .bubble.assistant")
    expect(shown).to_have_attribute("data-usage", re.compile("1,500 tokens in"))
    shown.hover()
    expect(shown).to_have_attribute("title", re.compile(f"{year}.*\nThis reply: 1 model call"))
    assert page.console_errors == [] and reopened.console_errors == []


def test_a_summarised_conversation_shows_a_collapsed_line_that_opens_to_the_summary(
    page_for, users, project
):
    rojo = make_rojo("http://127.0.0.1:9/v1")
    conversation = Conversation.objects.create(project=project, rojo=rojo, user=users["editor"])
    rows = [
        ("user", "Read a.md"),
        ("assistant", "a.md says hello."),
        ("user", "Read b.md"),
        ("summary", "- a.md says hello.\n- The user wants b.md next."),
        ("assistant", "b.md says goodbye."),
    ]
    for position, (role, content) in enumerate(rows):
        extra = {"until": 2, "summarised": 2, "from": 0} if role == "summary" else {}
        Message.objects.create(
            conversation=conversation, position=position, role=role, content=content, extra=extra
        )

    page = page_for(users["editor"])
    page.goto(f"/projects/{project.pk}/c/{conversation.pk}/")

    line = page.locator(".summary-line")
    expect(line).to_have_count(1)
    expect(line.locator("summary")).to_have_text("Earlier conversation summarised")
    expect(line.locator(".summary-text")).to_be_hidden()
    line.locator("summary").click()
    expect(line.locator(".summary-text")).to_have_text(rows[3][1])
    expect(page.locator(".bubble.assistant")).to_have_count(2)  # the stored turns stay whole
    screenshot(page, "window-summary")
    assert page.console_errors == []


def test_a_message_over_budget_is_refused_in_the_chat_and_kept_in_the_box(
    page_for, users, project, fake_provider, settings
):
    settings.ROJO_USER_DAILY_TOKENS = 100
    UsageRecord.objects.create(user=users["editor"], project=project, prompt_tokens=100)
    make_rojo(fake_provider.base_url)
    page = page_for(users["editor"])
    page.goto(f"/projects/{project.pk}/")

    page.get_by_label("Message").fill("Hello there")
    page.keyboard.press("Enter")

    expect(page.locator(".chat-error")).to_contain_text(
        "You have used up your daily budget of 100 tokens (today); it resets at midnight UTC"
    )
    expect(page.get_by_label("Message")).to_have_value("Hello there")
    expect(page.locator(".bubble.user")).to_have_count(0)
    assert fake_provider.requests == []
