"""`@` in the message box attaches a project file, picked from suggestions by keyboard; the
file's text goes to the model with the message and the bubble shows a chip for it, also
when the conversation is opened again."""

import pytest
from playwright.sync_api import expect

from roject.storage import project_root_create
from tests.support.browser import screenshot
from tests.support.fake_provider import stream, text_chunks
from tests.support.helpers import make_rojo

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_at_attaches_a_file_from_suggestions(page_for, users, project, fake_provider):
    root = project_root_create(project.pk)
    (root / "docs").mkdir()
    (root / "docs" / "plan.md").write_text("ship on friday\n")
    (root / "notes.md").write_text("n\n")
    make_rojo(fake_provider.base_url)
    fake_provider.add(stream(*text_chunks("It says friday.")))
    page = page_for(users["editor"])
    page.goto(f"/projects/{project.pk}/")
    box = page.get_by_label("Message")
    box.click()
    box.press_sequentially("When? @do")
    menu = page.get_by_role("listbox", name="Files to attach")
    expect(menu.get_by_role("option")).to_have_text(["docs/"])
    box.press("Enter")  # into the folder: its entries are offered
    expect(menu.get_by_role("option")).to_have_text(["docs/plan.md"])
    box.press("Enter")
    expect(box).to_have_value("When? @docs/plan.md ")
    chip = page.locator(".composer .attachment-chip")
    expect(chip).to_contain_text("docs/plan.md")
    expect(chip.get_by_role("button", name="Do not attach docs/plan.md")).to_be_visible()
    screenshot(page, "attach-picked")
    box.press("Enter")  # sends
    bubble = page.locator("rojo-chat-panel .bubble.user")
    expect(bubble.locator(".attachment-chip")).to_have_text(["docs/plan.md"])
    expect(page.locator("rojo-chat-panel .bubble.assistant")).to_have_text("It says friday.")
    sent = [m["content"] for m in fake_provider.requests[0]["messages"] if m["role"] == "user"]
    assert "ship on friday" in sent[0] and sent[0].startswith("When? @docs/plan.md")
    expect(page.locator(".composer .attachment-chip")).to_have_count(0)
    page.reload()  # the page's address is the conversation's now: it is opened again
    expect(page.locator("rojo-chat-panel .bubble.user .attachment-chip")).to_have_text(
        ["docs/plan.md"]
    )
    assert page.console_errors == []
