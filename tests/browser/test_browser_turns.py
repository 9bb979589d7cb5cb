"""Turns in a real browser: stopping, re-attaching, failing, reopening, and the panels around."""

import re
import threading
from datetime import UTC, datetime

import pytest
from channels.layers import DEFAULT_CHANNEL_LAYER, InMemoryChannelLayer, channel_layers
from playwright.sync_api import expect

from roject.storage import project_root
from rojos.models import Conversation, TurnRecord
from tests.support.browser import screenshot
from tests.support.fake_provider import Gate, http_error, stream, text_chunks, tool_call_chunks
from tests.support.helpers import PAGE, STORY, BrokenLayer, make_rojo, stored_history
from tests.support.live_server import wait_until

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

FIRST_QUESTION = "Plan the docs folder:\n" + "one page per topic, " * 6
REPLY = "I created **docs/intro/index.page** with:\n\n- a page header\n- a short intro paragraph"
LONG_TEXT = " ".join(f"word{i}" for i in range(120))
SECRET = "sk-test-secret-key-123"
ERROR_RED = "rgb(179, 38, 30)"  # --error in app.css


def open_project(page, project, conversation_id: int | None = None):
    path = f"/projects/{project.pk}/" + (f"c/{conversation_id}/" if conversation_id else "")
    return page.goto(path)


def send(page, text: str) -> None:
    page.get_by_label("Message").fill(text)
    page.keyboard.press("Enter")


def slow_reply(delay: float, held: threading.Event | None = None):
    """LONG_TEXT in 120 paced pieces; given `held`, the second half waits until it is set, so
    that what the test does while the reply runs cannot race the provider's pace."""
    chunks = text_chunks(LONG_TEXT, pieces=120)
    if held is not None:
        chunks.insert(60, Gate(held))
    return stream(*chunks, delay=delay)


def story_replies():
    return (
        stream(*tool_call_chunks([("create_directory", {"path": "docs/intro"})])),
        stream(
            *tool_call_chunks(
                [("write_text_content", {"path": "docs/intro/index.page", "text": PAGE})]
            )
        ),
        stream(*text_chunks(REPLY, pieces=10), delay=0.02),
    )


def expect_story_shown(page) -> None:
    panel = page.locator("rojo-chat-panel")
    expect(panel.locator(".bubble.user")).to_have_text(STORY)
    lines = panel.locator(".tool-line")
    expect(lines).to_have_count(2)
    expect(lines.nth(0)).to_contain_text('create_directory("docs/intro") → ok')
    expect(lines.nth(1)).to_contain_text('write_text_content("docs/intro/index.page", …) → ok')
    reply = panel.locator(".bubble.assistant")
    expect(reply.locator("strong")).to_have_text("docs/intro/index.page")
    expect(reply.locator("li")).to_have_text(["a page header", "a short intro paragraph"])


def expect_missing_file_error(page) -> None:
    panel = page.locator("rojo-chat-panel")
    line = panel.locator(".tool-line")
    expect(line).to_have_count(1)
    expect(line).to_contain_text(
        re.compile(r'get_text_content\("missing\.page"\) → error: .*missing\.page')
    )
    expect(line).to_have_class(re.compile(r"\berror\b"))
    expect(line).not_to_have_class(re.compile(r"\bok\b"))
    expect(line.locator(".outcome")).to_have_css("color", ERROR_RED)
    expect(panel.locator(".bubble.assistant")).to_have_text("There is no missing.page yet.")


def transcript(page) -> list[list[str]]:
    """Each item of the conversation log as [its class, its whole text, folded parts included]."""
    return page.locator("rojo-chat-panel .messages").evaluate(
        "log => [...log.children].map(node => [node.className, node.textContent])"
    )


def assert_within(locator, frame: dict) -> None:
    """The element lies wholly inside `frame` (a box, or the viewport's size): nothing cut off."""
    box = locator.bounding_box()
    left, top = frame.get("x", 0), frame.get("y", 0)
    assert box["x"] >= left and box["y"] >= top, (box, frame)
    assert box["x"] + box["width"] <= left + frame["width"] + 0.01, (box, frame)
    assert box["y"] + box["height"] <= top + frame["height"] + 0.01, (box, frame)


def conversation_url(project) -> re.Pattern:
    return re.compile(rf"/projects/{project.pk}/c/(\d+)/$")


def test_stop_before_the_reply_started_stops_it_when_it_starts(
    page_for, users, project, fake_provider
):
    """Stop pressed while the request is still on its way: the reply is stopped as it starts."""
    make_rojo(fake_provider.base_url)
    fake_provider.add(slow_reply(delay=0.05))
    # The Stop may reach the turn before or after it asks the provider: both are a stopped reply.
    fake_provider.allow_leftovers()
    page = page_for(users["editor"])
    open_project(page, project)
    panel = page.locator("rojo-chat-panel")
    held = []
    page.route(re.compile(r"/api/projects/\d+/chat$"), lambda route: held.append(route))

    send(page, "Write a long text.")
    stop = panel.get_by_role("button", name="Stop")
    expect(stop).to_be_visible()
    while not held:
        page.wait_for_timeout(10)
    stop.click()
    expect(stop).to_be_disabled()
    held[0].continue_()

    expect(panel.locator(".chat-error.stopped")).to_have_text("Stopped.")
    expect(stop).to_be_hidden()
    expect(page.get_by_label("Message")).to_be_editable()
    conversation = Conversation.objects.get()
    assert conversation.turn_id is None
    history = stored_history(conversation.pk)
    assert history[0].content == "Write a long text."
    assert all(m.content != LONG_TEXT for m in history)


def test_stop_ends_the_turn_and_keeps_the_partial_reply(page_for, users, project, fake_provider):
    """Stop ends a streaming reply at once; its partial text stays, shown and stored. The
    reply holds half-way until then, so a slow Stop cannot let it end first."""
    make_rojo(fake_provider.base_url)
    held = threading.Event()
    fake_provider.add(
        slow_reply(delay=0.05, held=held), stream(*text_chunks("Picking up from there."))
    )
    page = page_for(users["editor"])
    open_project(page, project)
    message_input = page.get_by_label("Message")
    panel = page.locator("rojo-chat-panel")

    send(page, "Write a long text.")
    reply = panel.locator(".bubble.assistant")
    expect(reply).to_contain_text("word3")
    stop = panel.get_by_role("button", name="Stop")
    expect(stop).to_be_visible()
    expect(message_input).to_be_editable()  # the next message can be typed meanwhile
    expect(panel.locator(".busy")).to_be_visible()
    stop.click()

    expect(panel.locator(".chat-error.stopped")).to_have_text("Stopped.")
    expect(panel.locator(".busy")).to_be_hidden()
    held.set()  # the stopped turn hung up: nothing more reaches the page
    expect(stop).to_be_hidden()
    expect(message_input).to_be_editable()
    shown = reply.get_attribute("data-text")
    assert shown.startswith("word0 word1 word2 word3")
    assert shown != LONG_TEXT and LONG_TEXT.startswith(shown)
    expect(reply).to_have_text(shown)

    conversation = Conversation.objects.get()
    assert conversation.turn_id is None
    assert [(m.role, m.content) for m in stored_history(conversation.pk)] == [
        ("user", "Write a long text."),
        ("assistant", shown),
    ]

    send(page, "Go on.")
    expect(reply.nth(1)).to_have_text("Picking up from there.")
    expect(panel.locator(".busy")).to_be_hidden()
    assert fake_provider.requests[1]["messages"][-2:] == [
        {"role": "assistant", "content": shown},
        {"role": "user", "content": "Go on."},
    ]
    assert Conversation.objects.count() == 1
    assert page.console_errors == []


def test_reload_mid_turn_reattaches_to_the_running_reply(page_for, users, project, fake_provider):
    """A reload while the rojo writes shows the question once and the whole reply once. The
    reply holds half-way until the reloaded page shows it running (a slow reload could
    otherwise come after its end)."""
    make_rojo(fake_provider.base_url)
    held = threading.Event()
    fake_provider.add(slow_reply(delay=0.04, held=held))
    page = page_for(users["editor"])
    open_project(page, project)
    panel = page.locator("rojo-chat-panel")

    send(page, "Write a long text.")
    expect(panel.locator(".bubble.assistant")).to_contain_text("word5")
    conversation = Conversation.objects.get()
    page.reload()

    expect(page).to_have_url(f"/projects/{project.pk}/c/{conversation.pk}/")
    expect(panel.locator(".bubble.user")).to_have_count(1)
    expect(panel.locator(".bubble.user")).to_have_text("Write a long text.")
    expect(panel.locator(".busy")).to_be_visible()
    expect(page.get_by_role("button", name="Send", exact=True)).to_be_disabled()
    held.set()
    reply = panel.locator(".bubble.assistant")
    expect(reply).to_have_text(LONG_TEXT)
    expect(panel.locator(".busy")).to_be_hidden()
    expect(page.get_by_label("Message")).to_be_editable()
    expect(reply).to_have_count(1)
    assert reply.get_attribute("data-text") == LONG_TEXT
    assert [(m.role, m.content) for m in stored_history(conversation.pk)] == [
        ("user", "Write a long text."),
        ("assistant", LONG_TEXT),
    ]
    assert page.console_errors == []


def test_provider_error_shows_inline_without_the_key(
    page_for, users, project, fake_provider, settings
):
    """A 401 names the status and the provider, never the key; the next message works."""
    settings.ROJO_PROVIDER_RETRIES = 0
    make_rojo(fake_provider.base_url, api_key=SECRET)
    rejected = {"error": {"message": f"Incorrect API key provided: {SECRET}", "code": "401"}}
    fake_provider.add(http_error(401, rejected), stream(*text_chunks("Now it works.")))
    page = page_for(users["editor"])
    open_project(page, project)
    panel = page.locator("rojo-chat-panel")

    send(page, "Hello?")
    error = panel.locator(".chat-error")
    expect(error).to_contain_text("401")
    expect(error).to_contain_text(fake_provider.base_url)
    expect(error).to_contain_text("API key")
    expect(error).not_to_contain_text(SECRET)
    expect(panel.locator(".busy")).to_be_hidden()
    expect(page.get_by_label("Message")).to_be_editable()

    send(page, "Hello again?")
    expect(panel.locator(".bubble.assistant")).to_have_text("Now it works.")
    assert SECRET not in page.content()
    assert Conversation.objects.count() == 1
    asked = [m["content"] for m in fake_provider.requests[1]["messages"] if m["role"] == "user"]
    assert asked == ["Hello?\n\nHello again?"]  # the unanswered one goes with the next


NGINX_502 = (
    "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n"
    "<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx/1.25.3</center>\r\n"
    "</body>\r\n</html>\r\n"
)


def test_a_proxys_html_error_page_reads_as_its_words(
    page_for, users, project, fake_provider, settings
):
    """A proxy in front of the provider answers with an HTML page: the chat says what the page
    says (its title), not its markup."""
    settings.ROJO_PROVIDER_RETRIES = 0
    make_rojo(fake_provider.base_url)
    fake_provider.add(http_error(502, NGINX_502, {"content-type": "text/html"}))
    page = page_for(users["editor"])
    open_project(page, project)

    send(page, "Hello?")
    error = page.locator("rojo-chat-panel .chat-error")
    expect(error).to_contain_text(f"{fake_provider.base_url}/ answered 502: 502 Bad Gateway")
    expect(error).not_to_contain_text("<")
    expect(error).not_to_contain_text("nginx")


def test_unreachable_provider_says_what_to_set(page_for, users, project, settings):
    """With nothing listening at the rojo's base URL, the chat names where it is set."""
    settings.ROJO_PROVIDER_RETRIES = 0
    make_rojo("http://127.0.0.1:9/v1")
    page = page_for(users["editor"])
    open_project(page, project)
    panel = page.locator("rojo-chat-panel")

    send(page, "Hello?")
    error = panel.locator(".chat-error")
    expect(error).to_contain_text("the base URL of the rojo 'Test rojo' in the admin")
    expect(error).to_contain_text("http://127.0.0.1:9/v1")
    expect(page.get_by_label("Message")).to_be_editable()


def test_reopened_conversation_shows_the_history_as_it_happened(
    page_for, users, project, fake_provider
):
    """A conversation opened afresh looks exactly as it did live: bubbles, lines, Markdown."""
    make_rojo(fake_provider.base_url)
    fake_provider.add(*story_replies())
    page = page_for(users["editor"])
    open_project(page, project)
    send(page, STORY)
    expect_story_shown(page)
    expect(page.locator("rojo-chat-panel .busy")).to_be_hidden()
    live = transcript(page)

    reopened = page_for(users["editor"])
    open_project(reopened, project, Conversation.objects.get().pk)
    expect_story_shown(reopened)
    assert transcript(reopened) == live
    # Each call that changed files has its Undo (on its own row, under the line), and the
    # turn one "Undo this turn".
    assert [name for name, _ in live] == [
        "bubble user",
        "message-tools",
        "tool-line ok",
        "undo",
        "tool-line ok",
        "undo",
        "bubble assistant",
        "undo undo-turn",
        "turn-actions",
    ]
    expect(reopened.locator(".tool-line + button.undo")).to_have_count(2)
    assert reopened.console_errors == []


def test_tool_error_is_shown_as_an_error_live_and_reopened(page_for, users, project, fake_provider):
    """A failed tool call reads "→ error: …" in the error colour, then and after reopening."""
    make_rojo(fake_provider.base_url)
    fake_provider.add(
        stream(*tool_call_chunks([("get_text_content", {"path": "missing.page"})])),
        stream(*text_chunks("There is no missing.page yet.")),
    )
    page = page_for(users["editor"])
    open_project(page, project)
    send(page, "Show me missing.page.")
    expect_missing_file_error(page)

    reopened = page_for(users["editor"])
    open_project(reopened, project, Conversation.objects.get().pk)
    expect_missing_file_error(reopened)


def test_shift_enter_adds_a_line_and_enter_sends(page_for, users, project, fake_provider):
    """Shift+Enter puts a newline in the message without sending; Enter sends it."""
    make_rojo(fake_provider.base_url)
    fake_provider.add(stream(*text_chunks("Two lines received.")))
    page = page_for(users["editor"])
    open_project(page, project)
    message_input = page.get_by_label("Message")
    panel = page.locator("rojo-chat-panel")

    message_input.click()
    page.keyboard.type("first line")
    page.keyboard.press("Shift+Enter")
    page.keyboard.type("second line")
    expect(message_input).to_have_value("first line\nsecond line")
    expect(panel.locator(".bubble")).to_have_count(0)
    assert fake_provider.requests == []

    page.keyboard.press("Enter")
    expect(panel.locator(".bubble.assistant")).to_have_text("Two lines received.")
    assert panel.locator(".bubble.user").text_content() == "first line\nsecond line"
    expect(message_input).to_have_value("")
    assert len(fake_provider.requests) == 1
    assert fake_provider.requests[0]["messages"][-1] == {
        "role": "user",
        "content": "first line\nsecond line",
    }


def test_file_tree_shows_a_new_file_while_the_turn_runs(page_for, users, project, fake_provider):
    """A file the rojo writes appears in the open root listing before its reply ends: the
    reply after the write waits until the tree showed the file."""
    root = project_root(project.pk)
    root.mkdir(parents=True, exist_ok=True)
    (root / "existing.txt").write_text("Already here.\n")
    make_rojo(fake_provider.base_url)
    tree_shown = threading.Event()
    fake_provider.add(
        stream(
            *tool_call_chunks([("write_text_content", {"path": "notes.txt", "text": "Notes\n"})])
        ),
        stream(Gate(tree_shown), *text_chunks("I wrote notes.txt.")),
    )
    page = page_for(users["editor"])
    open_project(page, project)
    tree = page.locator(".file-tree")
    expect(tree.get_by_role("button")).to_have_text(["existing.txt"])

    send(page, "Write notes.txt.")
    expect(tree.get_by_role("button")).to_have_text(["existing.txt", "notes.txt"])
    expect(page.locator("rojo-chat-panel .busy")).to_be_visible()
    tree_shown.set()
    expect(page.locator("rojo-chat-panel .bubble.assistant")).to_have_text("I wrote notes.txt.")
    expect(page.locator("rojo-chat-panel .busy")).to_be_hidden()
    tree.get_by_role("button", name="notes.txt").click()
    expect(page.locator(".file-content")).to_have_text("Notes\n")


def test_phone_width_shows_one_panel_at_a_time(page_for, users, project, fake_provider):
    """At 390 px the tabs switch between chat and files, and the story still works."""
    make_rojo(fake_provider.base_url)
    fake_provider.add(*story_replies())
    page = page_for(users["editor"], width=390, height=844)
    open_project(page, project)
    tabs = page.get_by_role("navigation", name="Panels")
    expect(tabs).to_be_visible()
    expect(tabs.get_by_role("button", name="Chat")).to_have_attribute("aria-pressed", "true")
    expect(page.locator("section.chat")).to_be_visible()
    expect(page.locator("aside.files")).to_be_hidden()
    expect(page.locator("aside.conversations")).to_be_hidden()

    send(page, STORY)
    expect_story_shown(page)
    expect(page.locator("rojo-chat-panel .busy")).to_be_hidden()
    assert_within(page.locator(".composer"), page.viewport_size)
    for line in page.locator(".tool-line").all():
        assert_within(line.locator(".outcome"), line.locator("summary").bounding_box())
    screenshot(page, "phone-chat")

    tabs.get_by_role("button", name="Files").click()
    expect(tabs.get_by_role("button", name="Files")).to_have_attribute("aria-pressed", "true")
    expect(page.locator("section.chat")).to_be_hidden()
    tree = page.locator(".file-tree")
    expect(tree).to_be_visible()
    tree.get_by_role("button", name="docs").click()
    tree.get_by_role("button", name="intro").click()
    tree.get_by_role("button", name="index.page").click()
    expect(page.locator(".file-content")).to_have_text(PAGE)
    screenshot(page, "phone-files")

    tabs.get_by_role("button", name="Conversations").click()
    expect(page.locator("aside.conversations")).to_be_visible()
    expect(page.locator(".conversation-list li[aria-current] a")).to_have_text(
        Conversation.objects.get().title
    )
    assert page.console_errors == []


def test_first_message_puts_the_conversation_on_top_of_the_list(
    page_for, users, project, fake_provider
):
    """The new conversation is listed first and current; New conversation starts afresh."""
    rojo = make_rojo(fake_provider.base_url)
    older = Conversation.objects.create(
        project=project, rojo=rojo, user=users["editor"], title="An older talk"
    )
    fake_provider.add(stream(*text_chunks("Planned.")), stream(*text_chunks("A fresh start.")))
    page = page_for(users["editor"])
    open_project(page, project)
    items = page.locator(".conversation-list li")
    expect(items).to_have_count(1)
    expect(items.first).to_contain_text("An older talk")

    send(page, FIRST_QUESTION)
    expect(page).to_have_url(conversation_url(project))
    conversation_id = int(conversation_url(project).search(page.url).group(1))
    assert conversation_id != older.pk
    expect(items).to_have_count(2)
    expect(items.first).to_have_attribute("aria-current", "page")
    expect(items.first).to_have_attribute("data-id", str(conversation_id))
    title = Conversation.objects.get(pk=conversation_id).title
    assert title.startswith("Plan the docs folder: one page per topic,") and title.endswith("…")
    expect(items.first.get_by_role("link")).to_have_text(title)
    assert items.first.get_by_role("link").text_content() == title
    expect(items.first.get_by_role("link")).to_have_attribute(
        "href", f"/projects/{project.pk}/c/{conversation_id}/"
    )
    expect(items.nth(1)).not_to_have_attribute("aria-current", "page")
    expect(page.locator("rojo-chat-panel .bubble.assistant")).to_have_text("Planned.")

    page.get_by_role("link", name="New conversation").click()
    expect(page).to_have_url(f"/projects/{project.pk}/")
    expect(page.locator("rojo-chat-panel .messages")).to_be_empty()
    expect(page.locator(".conversation-list li[aria-current]")).to_have_count(0)
    listed = page.locator(f".conversation-list li[data-id='{conversation_id}'] a")
    assert listed.text_content() == title
    send(page, "Something else.")
    expect(page.locator("rojo-chat-panel .bubble.assistant")).to_have_text("A fresh start.")
    expect(page.locator("rojo-chat-panel .bubble.user")).to_have_text("Something else.")
    expect(items).to_have_count(3)
    assert Conversation.objects.count() == 3
    new = Conversation.objects.exclude(pk__in=[older.pk, conversation_id]).get()
    expect(page).to_have_url(f"/projects/{project.pk}/c/{new.pk}/")
    expect(items.first).to_have_attribute("data-id", str(new.pk))
    assert [m.content for m in stored_history(new.pk)] == ["Something else.", "A fresh start."]


def test_replying_in_an_older_conversation_moves_it_to_the_top(
    page_for, users, project, fake_provider
):
    """The list stays newest first while the page is open, as after a reload."""
    rojo = make_rojo(fake_provider.base_url)
    older = Conversation.objects.create(project=project, rojo=rojo, title="Older")
    Conversation.objects.create(project=project, rojo=rojo, title="Newer")
    fake_provider.add(stream(*text_chunks("Back again.")))
    page = page_for(users["editor"])
    open_project(page, project, older.pk)
    items = page.locator(".conversation-list li")
    expect(items.first).to_contain_text("Newer")

    send(page, "Picking this up again")

    expect(page.locator("rojo-chat-panel .bubble.assistant")).to_have_text("Back again.")
    expect(items.first).to_have_attribute("data-id", str(older.pk))
    expect(items.first.locator("time")).to_have_count(1)


def test_a_reply_that_cannot_start_keeps_the_message_in_its_conversation(
    page_for, users, project, fake_provider, monkeypatch
):
    """With the relay down the message is kept and listed; the next one goes on there."""
    make_rojo(fake_provider.base_url)
    fake_provider.add(stream(*text_chunks("Back again.")))
    page = page_for(users["editor"])
    open_project(page, project)
    monkeypatch.setitem(channel_layers.backends, DEFAULT_CHANNEL_LAYER, BrokenLayer())

    send(page, "Are you there?")

    expect(page.locator(".chat-error")).to_have_text(
        "The server cannot reach its message relay; try again in a moment."
    )
    conversation = Conversation.objects.get()
    expect(page).to_have_url(f"/projects/{project.pk}/c/{conversation.pk}/")
    items = page.locator(".conversation-list li")
    expect(items.first).to_have_attribute("data-id", str(conversation.pk))
    expect(items.first.get_by_role("link")).to_have_text("Are you there?")
    expect(page.get_by_label("Message")).to_be_editable()

    monkeypatch.setitem(channel_layers.backends, DEFAULT_CHANNEL_LAYER, InMemoryChannelLayer())
    expect(page.locator("rojo-chat-panel .busy")).to_be_hidden()
    send(page, "And now?")

    expect(page.locator("rojo-chat-panel .bubble.assistant")).to_have_text("Back again.")
    expect(page.locator("rojo-chat-panel .busy")).to_be_hidden()  # the reply is stored by its DONE
    expect(items).to_have_count(1)
    assert Conversation.objects.count() == 1
    assert [m.content for m in stored_history(conversation.pk)] == [
        "Are you there?",
        "And now?",
        "Back again.",
    ]


def test_times_in_the_list_are_the_readers_local_time_in_one_format(
    page_for, users, project, fake_provider
):
    """The page is rendered in UTC; before, a turn rewrote its row in local time, in another
    format, and a reload put UTC back."""
    rojo = make_rojo(fake_provider.base_url)
    older = Conversation.objects.create(project=project, rojo=rojo, title="Older")
    Conversation.objects.filter(pk=older.pk).update(
        updated=datetime(2026, 11, 30, 20, 45, tzinfo=UTC)
    )
    page = page_for(users["editor"], timezone="America/Los_Angeles")
    open_project(page, project)

    expect(page.locator(".conversation-list time")).to_have_text("Nov 30, 12:45 PM")


def test_the_keyboard_focus_stays_in_the_box_while_a_reply_runs_and_is_not_taken_after(
    page_for, users, project, fake_provider
):
    """Each reply holds half-way until the test looked at the page while it runs."""
    make_rojo(fake_provider.base_url)
    first, second = threading.Event(), threading.Event()
    fake_provider.add(slow_reply(0.02, held=first), slow_reply(0.02, held=second))
    page = page_for(users["editor"])
    open_project(page, project)
    box = page.get_by_label("Message")

    send(page, "One")
    expect(page.locator("rojo-chat-panel .busy")).to_be_visible()
    expect(box).to_be_focused()  # writable while the reply runs: the next message is typed
    expect(box).to_be_editable()
    first.set()
    expect(page.locator("rojo-chat-panel .busy")).to_be_hidden()
    expect(box).to_be_focused()

    send(page, "Two")
    refresh = page.get_by_role("button", name="Refresh the file list")
    expect(page.locator("rojo-chat-panel .busy")).to_be_visible()
    refresh.focus()  # the reader went on to the files meanwhile
    second.set()
    expect(page.locator("rojo-chat-panel .busy")).to_be_hidden()
    expect(refresh).to_be_focused()


def test_back_on_the_chat_tab_the_reply_that_streamed_meanwhile_is_in_view(
    page_for, users, project, fake_provider
):
    make_rojo(fake_provider.base_url)
    many_lines = "\n\n".join(f"Paragraph {i}." for i in range(120))  # far past the screen
    fake_provider.add(stream(*text_chunks(many_lines, pieces=120), delay=0.03))
    page = page_for(users["editor"], width=390, height=844)
    open_project(page, project)
    tabs = page.get_by_role("navigation", name="Panels")
    send(page, FIRST_QUESTION)
    expect(page.locator("rojo-chat-panel .bubble.assistant")).to_be_visible()

    tabs.get_by_role("button", name="Files").click()
    wait_until(lambda: TurnRecord.objects.filter(finished__isnull=False).exists(), 15)
    # The page has the whole reply rendered (while its panel is hidden) and the turn ended.
    page.wait_for_function(
        """() => {
            const bubbles = document.querySelectorAll("rojo-chat-panel .bubble.assistant");
            const last = bubbles[bubbles.length - 1];
            const busy = document.querySelector("rojo-chat-panel .busy");
            return last?.textContent.includes("Paragraph 119.") && busy?.hidden;
        }""",
        timeout=15_000,
    )
    page.evaluate("() => new Promise((done) => requestAnimationFrame(() => done()))")
    tabs.get_by_role("button", name="Chat").click()

    log = page.locator("rojo-chat-panel .messages")
    sizes = log.evaluate("log => [log.scrollHeight, log.scrollTop, log.clientHeight]")
    assert sizes[0] > 3 * sizes[2]  # the reply is far longer than the screen
    assert sizes[0] - sizes[1] - sizes[2] < 80, sizes  # and its end is in view


def test_a_long_error_leaves_the_tool_name_readable(page_for, users, project, fake_provider):
    make_rojo(fake_provider.base_url)
    deep = "/".join(["deep"] * 40) + "/missing.txt"
    fake_provider.add(
        stream(*tool_call_chunks([("get_text_content", {"path": deep})])),
        stream(*text_chunks("It is not there.")),
    )
    page = page_for(users["editor"])
    open_project(page, project)
    send(page, "Read it")
    line = page.locator(".tool-line.error")
    expect(line.locator(".outcome")).to_contain_text("error: No such file")

    call = line.locator(".call").bounding_box()
    summary = line.locator("summary").bounding_box()
    assert call["width"] > 0.35 * summary["width"]  # "get_text_content(..." stays readable


def test_a_tree_refresh_keeps_the_keyboard_on_the_entry_it_was_on(
    page_for, users, project, fake_provider
):
    root = project_root(project.pk)
    root.mkdir(parents=True, exist_ok=True)
    (root / "a.md").write_text("A\n")
    make_rojo(fake_provider.base_url, approval_tools=[])
    write = ("write_text_content", {"path": "b.md", "text": "B\n"})
    focused = threading.Event()  # the write comes once the keyboard is on a.md
    fake_provider.add(
        stream(Gate(focused), *tool_call_chunks([write])), stream(*text_chunks("Done."))
    )
    page = page_for(users["editor"])
    open_project(page, project)
    tree = page.locator(".file-tree")
    send(page, "Write b.md")

    tree.get_by_role("button", name="a.md").focus()
    expect(tree.get_by_role("button", name="a.md")).to_be_focused()
    focused.set()
    expect(tree.get_by_role("button", name="b.md")).to_be_visible()  # the tree was refreshed

    expect(tree.get_by_role("button", name="a.md")).to_be_focused()


def test_a_streaming_reply_is_busy_for_screen_readers_until_it_is_whole(
    page_for, users, project, fake_provider
):
    """Re-rendered each frame as it streams; the log itself stays live, so an approval or an
    error during the turn is still announced."""
    make_rojo(fake_provider.base_url)
    held = threading.Event()  # the reply's second half waits until the page was looked at
    fake_provider.add(slow_reply(0.02, held=held))
    page = page_for(users["editor"])
    open_project(page, project)
    send(page, "Talk")
    reply = page.locator("rojo-chat-panel .bubble.assistant")

    expect(reply).to_have_attribute("aria-busy", "true")
    expect(page.locator("rojo-chat-panel .messages")).not_to_have_attribute("aria-busy", "true")
    held.set()
    expect(page.locator("rojo-chat-panel .busy")).to_be_hidden()
    expect(reply).not_to_have_attribute("aria-busy", "true")
