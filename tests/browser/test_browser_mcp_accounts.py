"""Two members, two accounts on one MCP server that asks for OAuth, in a real Chromium: a
member who has not connected is told how (the activity line's link), each connects through
the real authorization server (django-oauth-toolkit, its own login page) and back to Rojo's
callback, each one's tool calls reach the server as their own account; disconnecting stops
it; removing the member deletes their tokens."""

import pytest
from playwright.sync_api import expect

from roject.members.services import member_remove
from roject.storage import project_root_create
from rojos.models import McpAccount, RojoMcpServer
from tests.browser.test_browser_oidc import provider_login
from tests.support.browser import screenshot
from tests.support.fake_provider import stream, text_chunks, tool_call_chunks
from tests.support.helpers import make_rojo
from tests.support.oauth_mcp import protected_server_row

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def ask_whoami(page, fake_provider, project) -> str:
    """Send a message whose reply calls the server's `whoami`: what the server answered,
    as the rojo's next request carried it back."""
    fake_provider.add(
        stream(*tool_call_chunks([("tracker__whoami", {})])), stream(*text_chunks("Asked."))
    )
    asked = len(fake_provider.requests)
    page.get_by_label("Message").fill("Who am I on the tracker?")
    page.keyboard.press("Enter")
    expect(page.locator(".bubble.assistant").last).to_have_text("Asked.")
    after_call = fake_provider.requests[asked + 1]
    return next(m["content"] for m in reversed(after_call["messages"]) if m["role"] == "tool")


def connect(page, oidc, account: str) -> None:
    """On Connected accounts, press Connect and sign in at the provider as `account`."""
    page.locator("#mcp-tracker").get_by_role("button", name="Connect").click()
    page.wait_for_url(f"{oidc.base_url}/**")
    provider_login(page, oidc, account)
    page.wait_for_url("**/connections/")
    expect(page.locator(".message")).to_have_text("Your account on Tracker is connected.")
    expect(page.locator("#mcp-tracker .status")).to_have_text("connected")


def test_two_members_act_on_an_oauth_server_as_their_own_accounts(
    page_for, oidc, oauth_mcp, users, project, fake_provider, settings
):
    settings.ROJO_MCP_IDLE_SECONDS = 2
    project_root_create(project.pk)
    tracker = protected_server_row(oauth_mcp, sign_in="person")
    rojo = make_rojo(fake_provider.base_url)
    RojoMcpServer.objects.create(rojo=rojo, server=tracker, ask_before=False)

    editor = page_for(users["editor"])
    editor.goto(f"/projects/{project.pk}/")
    expect(editor.locator(".rojo-tools")).to_contain_text("Tracker (your account)")
    expect(editor.get_by_role("link", name="Connected accounts")).to_be_visible()
    told = ask_whoami(editor, fake_provider, project)
    assert "has not connected" in told and "/connections/#mcp-tracker" in told
    link = editor.locator(".tool-line").get_by_role("link", name="Connect your account")
    expect(link).to_be_visible()
    screenshot(editor, "mcp-oauth-not-connected")
    link.click()
    editor.wait_for_url("**/connections/#mcp-tracker")
    connect(editor, oidc, "alice")
    screenshot(editor, "mcp-oauth-connected")

    owner = page_for(users["owner"])
    owner.goto("/connections/")
    connect(owner, oidc, "bob")

    editor.goto(f"/projects/{project.pk}/")
    assert "account:alice" in ask_whoami(editor, fake_provider, project)
    owner.goto(f"/projects/{project.pk}/")
    assert "account:bob" in ask_whoami(owner, fake_provider, project)
    expect(owner.locator(".tool-line").last).to_contain_text("→ ok")

    owner.goto("/connections/")
    owner.locator("#mcp-tracker").get_by_role("button", name="Disconnect").click()
    expect(owner.locator("#mcp-tracker .status")).to_have_text("not connected")
    owner.goto(f"/projects/{project.pk}/")
    assert "has not connected" in ask_whoami(owner, fake_provider, project)
    editor.goto(f"/projects/{project.pk}/")
    assert "account:alice" in ask_whoami(editor, fake_provider, project)  # still theirs

    member_remove(by=users["owner"], project_id=project.pk, user_id=users["editor"].pk)
    assert not McpAccount.objects.exists()
