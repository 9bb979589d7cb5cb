"""Approvals routed to owners, in Chromium: the editor's page says the call waits for an
owner (no buttons), the owner's header count goes to 1 live and a notification goes out
(permission granted), the inbox shows the diff, and Approve runs the call."""

import re

import pytest
from playwright.sync_api import expect

from roject.storage import project_root_create
from tests.browser.test_browser_control import open_chat, overwrite_replies, send
from tests.support.browser import screenshot
from tests.support.helpers import make_rojo

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Records each notification the page makes, so the test can read them.
RECORD_NOTIFICATIONS = """
  window.notified = [];
  const Real = window.Notification;
  window.Notification = class extends Real {
    constructor(title, options) { super(title, options); window.notified.push(options.body); }
  };
"""


def test_the_owner_approves_from_the_inbox_with_the_live_count_and_a_notification(
    page_for, users, project, fake_provider, asgi_server, settings
):
    settings.ROJO_OWNER_APPROVAL_TIMEOUT = 60
    project.owner_approval = True
    project.save(update_fields=["owner_approval"])
    root = project_root_create(project.pk)
    (root / "notes.md").write_text("old\n")
    make_rojo(fake_provider.base_url)
    fake_provider.add(*overwrite_replies())
    owner = page_for(users["owner"])
    owner.context.grant_permissions(["notifications"], origin=asgi_server)
    owner.add_init_script(RECORD_NOTIFICATIONS)
    owner.goto("/approvals/")
    count = owner.locator(".approvals-count")
    expect(count).to_have_attribute("data-count", "0")
    expect(owner.locator(".inbox-empty")).to_be_visible()

    editor = page_for(users["editor"])
    open_chat(editor, project)
    send(editor, "Replace notes.md")
    waiting = editor.locator(".approval")
    expect(waiting.locator(".approval-wait")).to_have_text("Waiting for an owner to approve")
    expect(waiting.get_by_role("button")).to_have_count(0)
    expect(editor.locator(".approvals-link")).to_have_count(0)  # an editor has no inbox

    expect(count).to_have_text("1", timeout=3_000)
    entry = owner.locator(".inbox-entry")
    expect(entry).to_contain_text("editor asks to run write_text_content on notes.md")
    expect(entry.locator(".preview .removed")).to_have_text("-old\n")
    expect(entry.locator(".preview .added")).to_have_text("+new\n")
    assert owner.evaluate("window.notified") == ["A change waits for your approval."]
    screenshot(owner, "owner-approvals-inbox")
    assert (root / "notes.md").read_text() == "old\n"

    entry.get_by_role("button", name="Approve").click()

    expect(entry).to_have_count(0)
    expect(count).to_have_attribute("data-count", "0", timeout=3_000)
    expect(editor.locator(".tool-line")).to_contain_text('write_text_content("notes.md", …) → ok')
    expect(editor.locator(".bubble.assistant")).to_have_text("Done.")
    assert (root / "notes.md").read_text() == "new\n"
    assert owner.console_errors == [] and editor.console_errors == []


def test_an_owner_without_permission_is_offered_notifications(page_for, users, project):
    """Notify me asks the browser; a refusal is said where the button was, with the focus
    there (the button vanished with no word, and the focus fell to the page's start)."""
    page = page_for(users["owner"])
    page.goto("/")
    offer = page.get_by_role("button", name="Notify me")
    expect(offer).to_be_visible()
    expect(page.locator(".approvals-link")).to_have_attribute("href", "/approvals/")

    offer.focus()
    page.keyboard.press("Enter")  # headless Chromium refuses notifications at once
    note = page.get_by_role("status").filter(has_text="Notifications blocked")
    expect(note).to_be_visible()
    expect(note).to_be_focused()
    expect(note).to_have_attribute("title", re.compile("site settings"))
    expect(offer).to_have_count(0)

    page.reload()  # refused before: said on each page, not a button that cannot ask again
    blocked = page.locator(".notify-note")
    expect(blocked).to_have_text("Notifications blocked")
    expect(blocked).to_have_attribute("title", re.compile("site settings"))
    expect(page.get_by_role("button", name="Notify me")).to_have_count(0)
    assert page.console_errors == []
