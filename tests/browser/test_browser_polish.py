"""The small things, as a person sees them: dark mode, Esc, times, the tab title, the empty
conversation's suggestions, the file tree across reloads and its marks, the phone's rojo bar."""

import json
import re
import threading

import pytest
from playwright.sync_api import expect

from roject.storage import project_root_create
from rojos.models import Conversation
from tests.support.browser import screenshot
from tests.support.fake_provider import Gate, chunk, stream, text_chunks, tool_call_chunks
from tests.support.helpers import make_rojo

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LIGHT_BG = "rgb(251, 250, 248)"  # --bg of the light palette in theme.css
DARK_BG = "rgb(21, 19, 18)"  # --bg of the dark palette in theme.css
LONG_TEXT = " ".join(f"word{i}" for i in range(120))


def open_project(page, project, conversation_id: int | None = None):
    suffix = f"c/{conversation_id}/" if conversation_id else ""
    page.goto(f"/projects/{project.pk}/{suffix}")


def send(page, text: str) -> None:
    page.get_by_label("Message").fill(text)
    page.get_by_label("Message").press("Enter")


def test_dark_mode_follows_the_system_and_the_toggle_is_remembered(page_for, users, project):
    """A dark system gets the dark palette; the toggle switches to light and a reload keeps
    that choice, whatever the system says."""
    page = page_for(users["editor"])
    page.emulate_media(color_scheme="dark")
    open_project(page, project)
    root = "getComputedStyle(document.documentElement).backgroundColor"
    assert page.evaluate(root) == DARK_BG
    surface = page.locator(".composer").evaluate("e => getComputedStyle(e).backgroundColor")
    assert surface == "rgb(30, 27, 25)"
    toggle = page.get_by_role("button", name="Dark mode")
    expect(toggle).to_have_attribute("aria-pressed", "true")
    screenshot(page, "dark-mode")

    toggle.click()
    assert page.evaluate(root) == LIGHT_BG
    expect(toggle).to_have_attribute("aria-pressed", "false")
    page.reload()
    assert page.evaluate(root) == LIGHT_BG
    page.emulate_media(color_scheme="light")
    page.get_by_role("button", name="Dark mode").click()
    assert page.evaluate(root) == DARK_BG
    page.reload()
    assert page.evaluate(root) == DARK_BG


def test_dark_mode_colours_code_and_the_reply(page_for, users, project, fake_provider):
    """In the dark palette a reply's bubble and its code are dark, its keywords coloured."""
    make_rojo(fake_provider.base_url)
    fake_provider.add(stream(*text_chunks("Here:\n\n```python\ndef f():\n    return 1\n```\n")))
    page = page_for(users["editor"])
    page.emulate_media(color_scheme="dark")
    open_project(page, project)
    send(page, "Code please")
    block = page.locator(".bubble.assistant .code-block pre")
    expect(block.locator(".hljs-keyword").first).to_have_text("def")
    assert block.evaluate("e => getComputedStyle(e).backgroundColor") == "rgb(39, 35, 32)"
    assert page.locator(".bubble.assistant").evaluate(
        "e => getComputedStyle(e).backgroundColor"
    ) == ("rgb(30, 27, 25)")
    screenshot(page, "dark-mode-reply")


def test_escape_stops_a_running_reply(page_for, users, project, fake_provider):
    """Esc, with the focus in the message box, stops the reply as Stop does. The reply holds
    half-way until the test is done, so a slow Esc cannot let it end first."""
    make_rojo(fake_provider.base_url)
    held = threading.Event()
    chunks = text_chunks(LONG_TEXT, pieces=120)
    fake_provider.add(stream(*chunks[:60], Gate(held), *chunks[60:], delay=0.05))
    page = page_for(users["editor"])
    open_project(page, project)
    send(page, "Write a long text.")
    panel = page.locator("rojo-chat-panel")
    expect(panel.locator(".bubble.assistant")).to_contain_text("word3")
    page.keyboard.press("Escape")
    expect(panel.locator(".chat-error.stopped")).to_have_text("Stopped.")
    expect(panel.locator(".busy")).to_be_hidden()
    held.set()  # the stopped turn hung up: nothing more reaches the page
    shown = panel.locator(".bubble.assistant").get_attribute("data-text")
    assert shown != LONG_TEXT and LONG_TEXT.startswith(shown)
    page.keyboard.press("Escape")  # nothing runs: nothing happens
    expect(panel.locator(".chat-error")).to_have_count(1)


def test_the_tab_title_shows_a_running_reply_and_a_waiting_approval(
    page_for, users, project, fake_provider
):
    """While a reply runs the title says so; while an approval waits it asks for one; after
    the turn it is the page's title again."""
    root = project_root_create(project.pk)
    (root / "notes.md").write_text("old\n")
    make_rojo(fake_provider.base_url)
    working_seen = threading.Event()
    write = ("write_text_content", {"path": "notes.md", "text": "new\n"})
    fake_provider.add(
        stream(Gate(working_seen), *tool_call_chunks([write])), stream(*text_chunks("Done."))
    )
    page = page_for(users["editor"])
    open_project(page, project)
    base = page.title()
    assert base == "Demo Project · Rojo Chat"
    send(page, "Replace notes.md")
    expect(page).to_have_title(f"● Working… · {base}")
    working_seen.set()  # the call comes only now: a slow page cannot miss the running reply
    approval = page.locator(".approval")
    expect(approval).to_be_visible()
    expect(page).to_have_title(f"Approval needed · {base}")
    approval.get_by_role("button", name="Approve").click()
    expect(page.locator(".bubble.assistant").last).to_have_text("Done.")
    expect(page).to_have_title(base)


def test_an_empty_conversation_suggests_requests_that_fill_the_box(
    page_for, users, project, fake_provider
):
    """A new conversation explains the rojo and offers three requests (two to a viewer, who
    cannot write); a click puts one in the box without sending it; the first message hides
    the hint, and a stored conversation never shows it."""
    make_rojo(fake_provider.base_url)
    fake_provider.add(stream(*text_chunks("Here they are.")))
    page = page_for(users["editor"])
    open_project(page, project)
    hint = page.get_by_role("region", name="Getting started")
    expect(hint).to_be_visible()
    examples = hint.get_by_role("button")
    expect(examples).to_have_count(3)
    screenshot(page, "empty-conversation")
    examples.nth(0).click()
    box = page.get_by_label("Message")
    expect(box).to_have_value("List the files in this project and tell me what each folder is for.")
    expect(box).to_be_focused()
    assert fake_provider.requests == []
    box.press("Enter")
    expect(page.locator(".bubble.assistant")).to_have_text("Here they are.")
    expect(hint).to_be_hidden()

    reopened = page_for(users["editor"])
    open_project(reopened, project, Conversation.objects.get().pk)
    expect(reopened.locator(".bubble.assistant")).to_have_text("Here they are.")
    expect(reopened.get_by_role("region", name="Getting started")).to_be_hidden()

    viewer = page_for(users["viewer"])
    open_project(viewer, project)
    expect(
        viewer.get_by_role("region", name="Getting started").get_by_role("button")
    ).to_have_count(2)


def test_a_first_message_taller_than_the_log_leaves_the_reply_in_view(
    page_for, users, project, fake_provider
):
    """The log of a new conversation follows its end from the first message on: a first
    message taller than the log left it at its top (sized to the message while the hint
    showed), and the reply streamed in out of view."""
    make_rojo(fake_provider.base_url)
    gate = threading.Event()
    fake_provider.add(
        stream(*text_chunks("Reading it.", finish=None), Gate(gate), chunk({}, "stop"))
    )
    page = page_for(users["editor"])
    open_project(page, project)
    expect(page.get_by_role("region", name="Getting started")).to_be_visible()
    send(page, "\n".join(f"Line {n} of a long request." for n in range(80)))

    expect(page.locator(".bubble.assistant")).to_have_text("Reading it.")
    expect(page.locator(".bubble.assistant")).to_be_in_viewport()
    gate.set()
    expect(page.locator("rojo-chat-panel .busy")).to_be_hidden()


def test_the_file_tree_keeps_what_was_expanded_across_reloads(page_for, users, project):
    """Expanded folders stay expanded after a reload, for this project only; a folder closed
    again stays closed."""
    root = project_root_create(project.pk)
    (root / "docs/intro").mkdir(parents=True)
    (root / "docs/intro/index.page").write_text("hi\n")
    (root / "src").mkdir()
    (root / "src/app.py").write_text("print(1)\n")
    page = page_for(users["editor"])
    open_project(page, project)
    tree = page.locator(".file-tree")
    tree.get_by_role("button", name="docs").click()
    tree.get_by_role("button", name="intro").click()
    tree.get_by_role("button", name="src").click()
    tree.get_by_role("button", name="src").click()  # closed again
    expect(tree.get_by_role("button", name="index.page")).to_be_visible()

    page.reload()
    expect(tree.get_by_role("button", name="index.page")).to_be_visible()
    expect(tree.get_by_role("button", name="intro")).to_have_attribute("aria-expanded", "true")
    expect(tree.get_by_role("button", name="src")).to_have_attribute("aria-expanded", "false")
    expect(tree.get_by_role("button", name="app.py")).to_have_count(0)
    stored = page.evaluate(f"localStorage.getItem('rojo-chat:expanded:{project.pk}')")
    assert sorted(json.loads(stored)) == ["docs", "docs/intro"]


def test_the_file_tree_marks_what_the_latest_turn_changed(page_for, users, project, fake_provider):
    """The file the turn wrote is marked, and the folder holding it; a reload keeps the marks;
    the next turn's changes replace them."""
    project_root_create(project.pk)
    make_rojo(fake_provider.base_url)
    fake_provider.add(
        stream(*tool_call_chunks([("write_text_content", {"path": "docs/a.md", "text": "A\n"})])),
        stream(*text_chunks("Wrote it.")),
        stream(*tool_call_chunks([("write_text_content", {"path": "b.md", "text": "B\n"})])),
        stream(*text_chunks("Wrote b.")),
    )
    page = page_for(users["editor"])
    open_project(page, project)
    send(page, "Write docs/a.md")
    expect(page.locator(".bubble.assistant")).to_have_text("Wrote it.")
    tree = page.locator(".file-tree")
    docs = tree.locator('li[data-path="docs"]')
    expect(docs).to_have_class("holds-changed")
    tree.get_by_role("button", name="docs").click()
    written = tree.locator('li[data-path="docs/a.md"]')
    expect(written).to_have_class("changed")
    expect(written.locator(".entry")).to_have_attribute("title", "Changed by the latest turn")
    screenshot(page, "tree-changed-marks")

    page.reload()
    expect(tree.locator('li[data-path="docs/a.md"]')).to_have_class("changed")
    expect(page.locator("rojo-chat-panel .busy")).to_be_hidden()  # the first turn's DONE
    send(page, "Write b.md")
    expect(page.locator(".bubble.assistant").last).to_have_text("Wrote b.")
    expect(tree.locator('li[data-path="b.md"]')).to_have_class("changed")
    expect(tree.locator('li[data-path="docs/a.md"]')).not_to_have_class("changed")
    expect(tree.locator('li[data-path="docs"]')).not_to_have_class("holds-changed")


def test_messages_show_their_time_when_pointed_at(page_for, users, project, fake_provider):
    """Pointing at a message shows its time; a reopened conversation shows the stored times."""
    make_rojo(fake_provider.base_url)
    fake_provider.add(stream(*text_chunks("Hello.")))
    page = page_for(users["editor"], timezone="UTC")
    open_project(page, project)
    send(page, "Hi")
    reply = page.locator(".bubble.assistant")
    expect(reply).to_have_text("Hello.")
    expect(reply).not_to_have_attribute("data-time", re.compile("."))
    reply.hover()
    expect(reply).to_have_attribute("data-time", re.compile(r"^\d\d:\d\d"))

    asked = Conversation.objects.get().messages.get(role="user").created
    reopened = page_for(users["editor"], timezone="UTC")
    open_project(reopened, project, Conversation.objects.get().pk)
    question = reopened.locator(".bubble.user")
    question.hover()
    shown = reopened.evaluate(
        "iso => new Date(iso).toLocaleTimeString(undefined, {hour: '2-digit', minute: '2-digit'})",
        asked.isoformat(),
    )
    assert re.fullmatch(r"\d\d:\d\d( [AP]M)?", shown)
    expect(question).to_have_attribute("data-time", shown)
    expect(question).to_have_attribute("title", re.compile(asked.strftime("%Y")))


def test_on_a_phone_the_rojo_bar_is_one_line_that_opens(page_for, users, project, fake_provider):
    """At 390 px the rojo bar is a single line (the rojo and More); More shows the tools."""
    make_rojo(fake_provider.base_url)
    page = page_for(users["editor"], width=390, height=844)
    open_project(page, project)
    bar = page.locator(".rojo-bar")
    expect(page.locator("#rojo-picker")).to_be_visible()
    assert bar.bounding_box()["height"] <= 48
    expect(page.locator(".rojo-tools")).to_be_hidden()
    screenshot(page, "phone-rojo-bar")
    more = bar.get_by_role("button", name="More about this rojo")
    more.click()
    expect(page.locator(".rojo-tools")).to_be_visible()
    expect(more).to_have_attribute("aria-expanded", "true")
    more.click()
    expect(page.locator(".rojo-tools")).to_be_hidden()
    wide = page_for(users["editor"])
    open_project(wide, project)
    expect(wide.locator(".rojo-tools")).to_be_visible()
    expect(wide.locator(".rojo-bar-more")).to_be_hidden()


def test_escape_in_another_box_leaves_the_running_reply_alone(
    page_for, users, project, fake_provider
):
    """Esc in the conversation search, which clears it, or in a conversation's rename box,
    which cancels the rename, is meant for that box: the reply goes on."""
    make_rojo(fake_provider.base_url)
    gate = threading.Event()
    fake_provider.add(
        stream(*text_chunks("Working on it.", finish=None), Gate(gate), chunk({}, "stop"))
    )
    page = page_for(users["editor"])
    open_project(page, project)
    send(page, "Take your time.")
    panel = page.locator("rojo-chat-panel")
    expect(panel.locator(".bubble.assistant")).to_have_text("Working on it.")

    search = page.get_by_label("Search the conversations of your projects")
    search.fill("something")
    search.press("Escape")
    expect(search).to_have_value("")
    expect(panel.locator(".busy")).to_be_visible()
    expect(panel.locator(".chat-error")).to_have_count(0)
    row = page.locator(".conversation-list li").first
    row.hover()
    row.get_by_role("button", name="Rename this conversation").click()
    page.get_by_label("New title").press("Escape")
    expect(page.get_by_label("New title")).to_have_count(0)

    expect(panel.locator(".busy")).to_be_visible()
    expect(panel.locator(".chat-error")).to_have_count(0)
    gate.set()
    expect(panel.locator(".busy")).to_be_hidden()
    expect(panel.locator(".chat-error")).to_have_count(0)
