"""What every person can read and use: each main page passes axe-core's WCAG 2.2 AA rules in
the light and the dark theme, and no icon needs an emoji font (a pictograph such as 📌 🗑 ⬇ ⚙
shows as a box without one), while each icon's button keeps its name."""

import pytest
from playwright.sync_api import expect

from roject.identity.tokens import api_token_create
from roject.members.invitations import invitation_create
from roject.models import Role
from rojos.models import Conversation, McpServer
from tests.support.accessibility import axe_violations
from tests.support.browser import screenshot
from tests.support.fake_provider import stream, text_chunks, tool_call_chunks
from tests.support.helpers import make_rojo

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

REPLY = "Wrote **notes.md**:\n\n```python\ndef f():\n    return 1\n```\n\n> done"

# Every text, name, title and generated content (::before, ::after) the page shows, joined.
SHOWN_TEXT = """() => {
  const parts = [document.title, document.body.innerText];
  for (const element of document.querySelectorAll("body *")) {
    for (const name of ["aria-label", "title", "placeholder", "value"]) {
      if (element.hasAttribute(name)) parts.push(element.getAttribute(name));
    }
    for (const pseudo of ["::before", "::after"]) {
      parts.push(getComputedStyle(element, pseudo).content);
    }
  }
  return parts.join("\\n");
}"""
PICTOGRAPHS = "text => [...text.matchAll(/\\p{Extended_Pictographic}/gu)].map(m => m[0])"


def a_worked_project(page_for, users, project, fake_provider, *, scheme: str):
    """The owner's page after a turn that wrote a file: a reply with code, a call line with
    its Undo, the file open in the viewer; a token exists for the tokens page."""
    make_rojo(fake_provider.base_url)
    fake_provider.add(
        stream(*tool_call_chunks([("write_text_content", {"path": "notes.md", "text": "hi\n"})])),
        stream(*text_chunks(REPLY)),
    )
    api_token_create(user=users["owner"], name="laptop agent")
    page = page_for(users["owner"])
    page.emulate_media(color_scheme=scheme)
    page.goto(f"/projects/{project.pk}/")
    page.get_by_label("Message").fill("Write notes.md")
    page.get_by_label("Message").press("Enter")
    expect(page.locator(".bubble.assistant strong")).to_have_text("notes.md")
    expect(page.locator(".tool-line + button.undo")).to_be_visible()
    return page


def open_the_file(page, path: str) -> None:
    page.locator(".file-tree").get_by_role("button", name=path).click()
    expect(page.locator(".file-viewer .file-name")).to_have_text(path)


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_every_page_passes_wcag_2_2_aa_in_both_themes(
    page_for, users, project, fake_provider, scheme
):
    """Login, the project list, the project page with a conversation and an open file, its
    read-only page, members (with a pending invitation), settings, API tokens, connected
    accounts, the audit log, the approvals inbox and an invitation's page: no axe-core
    violation."""
    McpServer.objects.create(
        name="Tracker", slug="tracker", transport="http", url="https://mcp.example.com/mcp",
        sign_in="person",
    )  # fmt: skip
    page = a_worked_project(page_for, users, project, fake_provider, scheme=scheme)
    conversation = Conversation.objects.get()
    invitation = invitation_create(by=users["owner"], project_id=project.pk, role=Role.VIEWER)
    dark = page.evaluate("matchMedia('(prefers-color-scheme: dark)').matches")
    assert dark is (scheme == "dark")

    page.goto(f"/projects/{project.pk}/c/{conversation.pk}/")
    expect(page.locator(".bubble.assistant strong")).to_have_text("notes.md")
    open_the_file(page, "notes.md")
    found = {"project page": axe_violations(page)}
    screenshot(page, f"axe-project-{scheme}")
    for url in [
        "/",
        f"/projects/{project.pk}/c/{conversation.pk}/read/",
        f"/projects/{project.pk}/members/",
        f"/projects/{project.pk}/settings/",
        "/tokens/",
        "/connections/",
        f"/projects/{project.pk}/audit/",
        "/approvals/",
    ]:
        page.goto(url)
        expect(page.get_by_role("button", name="Log out")).to_be_visible()
        found[url] = axe_violations(page)

    invited = page_for(users["outsider"])
    invited.emulate_media(color_scheme=scheme)
    invited.goto(f"/invitations/{invitation.token}/")
    expect(invited.get_by_role("button", name="Log out")).to_be_visible()
    found["invitation"] = axe_violations(invited)

    login = page_for()
    login.emulate_media(color_scheme=scheme)
    login.goto("/login/")
    expect(login.get_by_role("button", name="Log in")).to_be_visible()
    found["/login/"] = axe_violations(login)
    assert {where: v for where, v in found.items() if v} == {}


def test_the_theme_toggle_gives_the_same_passing_dark_palette(
    page_for, users, project, fake_provider
):
    """Dark picked with the header's toggle on a light system passes as the system's dark does:
    the primary buttons' and the user's bubble's text stays readable on the accent."""
    page = a_worked_project(page_for, users, project, fake_provider, scheme="light")
    page.get_by_role("button", name="Dark mode").click()
    expect(page.locator("html")).to_have_attribute("data-theme", "dark")
    assert axe_violations(page) == []
    page.goto(f"/projects/{project.pk}/members/")
    assert axe_violations(page) == []


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_a_call_line_pointed_at_stays_readable(page_for, users, project, fake_provider, scheme):
    """The pointer on an activity line shades it: its "→ ok" stays above 4.5:1 (it was
    4.39:1 on the light shade)."""
    page = a_worked_project(page_for, users, project, fake_provider, scheme=scheme)
    page.locator(".tool-line summary").first.hover()
    assert axe_violations(page) == []


def test_no_icon_needs_an_emoji_font(page_for, users, project, fake_provider):
    """The project page with a pinned conversation, a call line, the file tree's and the list's
    row actions shown: no pictograph in any text, name or generated content; the icon-only
    buttons and links are found by their names."""
    page = a_worked_project(page_for, users, project, fake_provider, scheme="light")
    conversation = Conversation.objects.get()
    row = page.locator(f'.conversation-list li[data-id="{conversation.pk}"]')
    row.hover()
    row.get_by_role("button", name="Pin this conversation").click()
    expect(row).to_have_attribute("data-pinned", "true")
    row.hover()
    for name in ("Unpin this conversation", "Rename this conversation", "Delete this conversation"):
        expect(row.get_by_role("button", name=name)).to_be_visible()
    shown = page.evaluate(SHOWN_TEXT)
    assert page.evaluate(PICTOGRAPHS, shown) == []

    entry = page.locator('.file-tree li[data-path="notes.md"]')
    entry.hover()
    expect(entry.get_by_role("link", name="Download")).to_be_visible()
    expect(entry.get_by_role("button", name="Rename or move")).to_be_visible()
    expect(entry.get_by_role("button", name="Delete")).to_be_visible()
    open_the_file(page, "notes.md")
    for name in ("Refresh the file list", "Close file", "Upload files", "Dark mode"):
        expect(page.get_by_role("button", name=name)).to_be_visible()
    expect(page.get_by_role("link", name="Download the whole project")).to_be_visible()
    expect(page.get_by_role("button", name="Regenerate")).to_be_visible()
    assert page.evaluate(PICTOGRAPHS, page.evaluate(SHOWN_TEXT)) == []
    # Each icon is drawn: an <svg> of real size, in the text's colour.
    icon = page.locator(".tool-line .gear svg")
    assert icon.bounding_box()["width"] > 5
    screenshot(page, "icons-without-emoji")
    assert page.console_errors == []
