"""API tokens and MCP conversations in a real Chromium.

The tokens page (linked from the header) makes a named token and shows it once, lists it
by prefix with its dates, and revokes it; an outside agent's MCP calls show in the
project as a conversation "via MCP (<token name>)" whose changes can be undone, with no
composer.
"""

import pytest
from playwright.sync_api import expect

from roject.identity.tokens import api_token_check, api_token_create
from roject.models import ApiToken
from roject.storage import project_root_create
from rojos.models import FileChange
from tests.support.browser import screenshot
from tests.support.mcp_clients import mcp_url, with_mcp

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_token_is_created_shown_once_listed_and_revoked(page_for, users, project):
    page = page_for(users["editor"])
    page.goto(f"/projects/{project.pk}/")
    expect(page.locator(".mcp-hint")).to_contain_text(f"/mcp/projects/{project.slug}")
    page.get_by_role("link", name="API tokens").first.click()
    expect(page.get_by_role("heading", name="API tokens")).to_be_visible()

    page.get_by_label("Name").fill("Claude Code")
    page.get_by_label("Expires").select_option("30")
    page.get_by_label("Read-only").check()
    page.get_by_role("button", name="Create token").click()

    secret = page.get_by_label("The new token").input_value()
    token = api_token_check(secret)
    assert (token.name, token.read_only, token.user) == ("Claude Code", True, users["editor"])
    row = page.locator(f'tr[data-token="{token.pk}"]')
    expect(row).to_contain_text(secret[:11] + "…")
    expect(row).to_contain_text("read-only")
    expect(row).to_contain_text(token.expires.strftime("%Y-%m-%d"))
    assert secret not in row.inner_text()
    screenshot(page, "api-tokens")

    page.reload()  # posts the form again: no second token is made, none is shown
    expect(page.get_by_label("The new token")).to_have_count(0)
    assert secret not in page.content()
    assert ApiToken.objects.count() == 1

    row.get_by_role("button", name="Revoke").click()
    expect(page.locator(f'tr[data-token="{token.pk}"]')).to_contain_text("revoked")
    assert ApiToken.objects.get(pk=token.pk).revoked is not None
    assert page.console_errors == []


def test_an_mcp_conversation_shows_its_calls_and_undoes_them(page_for, users, project, asgi_server):
    root = project_root_create(project.pk)
    (root / "a.txt").write_text("before\n")
    secret = api_token_create(user=users["editor"], name="agent").secret
    result = with_mcp(
        mcp_url(asgi_server, project.pk),
        secret,
        lambda c: c.call_tool("write_text_content", {"path": "a.txt", "text": "after\n"}),
    )
    conversation = result.meta["rojo.chat/conversation"]

    page = page_for(users["owner"])
    page.goto(f"/projects/{project.pk}/")
    page.get_by_role("link", name="via MCP (agent)").click()
    expect(page.locator(".mcp-note")).to_contain_text("agent")
    expect(page.locator(".composer")).to_be_hidden()
    expect(page.locator(".bubble.user")).to_have_text("MCP call: write_text_content")
    expect(page.locator(".tool-line")).to_contain_text("write_text_content")
    screenshot(page, "mcp-conversation")
    page.locator(".tool-line + button.undo").click()  # under the call's line
    expect(page.locator(".tool-line.undone")).to_have_count(1)
    assert (root / "a.txt").read_text() == "before\n"
    assert FileChange.objects.get(conversation_id=conversation).undone_by == users["owner"]
    assert page.console_errors == []
