"""The admin as an administrator sees it: a long conversation wraps inside the page and shows
each assistant message's tool calls; a new rojo starts with the default tools checked."""

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from rojos.models import Conversation, Message, default_approval_tools, default_tools
from tests.support.browser import screenshot
from tests.support.helpers import make_rojo

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LONG = "word " * 5000  # 25,000 characters on one line


def test_the_conversation_view_wraps_long_text_and_shows_tool_calls(page_for, admin_user, project):
    """A 25,000-character message wraps: the page is no wider than the window; the assistant
    message that only called a tool shows the call with its arguments."""
    rojo = make_rojo("http://127.0.0.1:9/v1")
    conversation = Conversation.objects.create(project=project, rojo=rojo, title="Long one")
    Message.objects.create(conversation=conversation, position=0, role="user", content=LONG)
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "list_files", "arguments": '{"path": "docs"}'},
    }
    Message.objects.create(
        conversation=conversation, position=1, role="assistant", content="", tool_calls=[call]
    )
    Message.objects.create(
        conversation=conversation, position=2, role="tool", content='["a.md"]',
        tool_call_id="call_1", name="list_files",
    )  # fmt: skip
    page = page_for(admin_user, width=1280)
    page.goto(reverse("admin:rojos_conversation_change", args=[conversation.pk]))

    expect(page.locator(".rojo-admin-call")).to_have_text('list_files({"path": "docs"}) · call_1')
    expect(page.get_by_text("list_files → ok (call_1)")).to_be_visible()
    text = page.locator(".rojo-admin-text").first
    expect(text).to_be_visible()
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 1280, f"the page is {width} px wide"
    assert text.bounding_box()["height"] > 100  # wrapped onto many lines
    screenshot(page, "admin-conversation")


def test_a_new_rojo_starts_with_the_default_tools_checked(page_for, admin_user):
    """The add page checks create_rojo's tools and Ask-before tools."""
    page = page_for(admin_user)
    page.goto(reverse("admin:rojos_rojo_add"))
    for name in default_tools():
        expect(page.locator(f'input[name="tools"][value="{name}"]')).to_be_checked()
    for name in default_approval_tools():
        expect(page.locator(f'input[name="approval_tools"][value="{name}"]')).to_be_checked()
    expect(page.locator('input[name="tools"]:checked')).to_have_count(len(default_tools()))
