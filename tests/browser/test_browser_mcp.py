"""An MCP tool on the page: its approval names the server, and its activity line says what
it changed is not undoable, live and reopened."""

import re

import pytest
from playwright.sync_api import expect

from roject.storage import project_root_create
from rojos.models import Conversation, RojoMcpServer
from tests.support.browser import screenshot
from tests.support.fake_provider import stream, text_chunks, tool_call_chunks
from tests.support.helpers import make_rojo
from tests.support.mcp_helpers import edge_server, progress_server

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_an_mcp_write_asks_naming_its_server_and_is_marked_not_undoable(
    page_for, users, project, fake_provider, settings
):
    settings.ROJO_MCP_IDLE_SECONDS = 2  # the edge server stops soon after the test
    root = project_root_create(project.pk)
    rojo = make_rojo(fake_provider.base_url)
    RojoMcpServer.objects.create(rojo=rojo, server=edge_server())
    fake_provider.add(
        stream(*tool_call_chunks([("edge__write_note", {"name": "n.txt", "text": "hi"})])),
        stream(*text_chunks("Written.")),
    )
    page = page_for(users["editor"])
    page.goto(f"/projects/{project.pk}/")
    expect(page.locator(".rojo-tools")).to_contain_text("· MCP servers: Edge")
    page.get_by_label("Message").fill("Write a note")
    page.keyboard.press("Enter")

    approval = page.locator(".approval")
    # The first use starts the server: a Python process, slow on a busy machine.
    expect(approval).to_contain_text("write_note on the MCP server Edge", timeout=30_000)
    expect(approval).to_contain_text("not in the undo ledger")
    screenshot(page, "mcp-approval")
    approval.get_by_role("button", name="Approve").click()

    line = page.locator(".tool-line")
    expect(line).to_contain_text("→ ok · MCP server Edge; not undoable here")
    expect(page.locator(".bubble.assistant")).to_have_text("Written.")
    expect(page.locator("button.undo")).to_have_count(0)
    assert (root / "n.txt").read_text() == "hi"

    page.goto(f"/projects/{project.pk}/c/{Conversation.objects.get().pk}/")
    expect(page.locator(".tool-line")).to_contain_text("MCP server Edge; not undoable here")
    screenshot(page, "mcp-activity-line")


def test_a_long_mcp_calls_progress_shows_on_its_line_and_after_a_reload(
    page_for, users, project, fake_provider, settings
):
    """The server's reports replace each other on the running call's line, its message shown
    as text (never markup); a reload while the call runs shows the latest; the result then
    takes the line's place."""
    settings.ROJO_MCP_IDLE_SECONDS = 2
    project_root_create(project.pk)
    rojo = make_rojo(fake_provider.base_url)
    RojoMcpServer.objects.create(rojo=rojo, server=progress_server(), ask_before=False)
    args = {"steps": 12, "every": 1.0, "label": "<i>page</i>"}
    fake_provider.add(
        stream(*tool_call_chunks([("progress__steady", args)])), stream(*text_chunks("Fetched."))
    )
    page = page_for(users["editor"])
    page.goto(f"/projects/{project.pk}/")
    page.get_by_label("Message").fill("Fetch the pages")
    page.keyboard.press("Enter")

    outcome = page.locator(".tool-line .outcome")
    expect(outcome).to_contain_text(
        re.compile(r"\d+/12 \(\d+%\) · <i>page</i> \d+"), timeout=30_000
    )
    expect(page.locator(".tool-line .outcome i")).to_have_count(0)
    screenshot(page, "mcp-progress")
    expect(outcome).to_contain_text(re.compile(r"[3-9]/12 \(\d+%\)"))

    page.reload()  # the turn's log gives the reopened page the latest report
    expect(outcome).to_contain_text(re.compile(r"(?:[3-9]|1[01])/12 \(\d+%\) · <i>page</i>"))
    expect(outcome).to_contain_text("→ ok", timeout=30_000)
    expect(outcome).not_to_contain_text("/12")
    expect(page.locator(".bubble.assistant")).to_have_text("Fetched.")
