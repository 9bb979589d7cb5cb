"""Type while it works, in Chromium: while a reply runs (held open by a Gate, or waiting for
an approval), Enter queues the message under the log; the queue survives a reload, each
queued message can be edited or removed and keeps its `@` files, and the queue is sent one
message at a time, in order, once the reply ends. "Stop and send" stops the reply first; after
an error the queue waits until the person sends it on."""

import threading

import pytest
from playwright.sync_api import expect

from roject.storage import project_root_create
from rojos.models import Conversation
from tests.support.accessibility import axe_violations
from tests.support.browser import screenshot
from tests.support.fake_provider import (
    Gate,
    chunk,
    http_error,
    stream,
    text_chunks,
    tool_call_chunks,
)
from tests.support.helpers import make_rojo

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

QUEUE_KEYS = "() => Object.keys(localStorage).filter((k) => k.startsWith('rojo-chat:queue:'))"


def held_reply(gate: threading.Event):
    """A reply that says it works, then waits for `gate` before it ends."""
    return stream(*text_chunks("Working on it.", finish=None), Gate(gate), chunk({}, "stop"))


def user_texts(request: dict) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "user"]


def send(page, text: str) -> None:
    page.get_by_label("Message").fill(text)
    page.get_by_label("Message").press("Enter")


def test_two_queued_messages_survive_a_reload_and_are_sent_in_order_after_the_reply(
    page_for, users, project, fake_provider
):
    """The issue's case: two messages queued during a reply, a reload in between, and both
    sent after it, in order, each once its own reply ended."""
    make_rojo(fake_provider.base_url, approval_tools=[])
    gate = threading.Event()
    fake_provider.add(
        held_reply(gate),
        stream(*text_chunks("Answer one.")),
        stream(*text_chunks("Answer two.")),
    )
    page = page_for(users["editor"])
    page.goto(f"/projects/{project.pk}/")
    send(page, "Write the report")
    panel = page.locator("rojo-chat-panel")
    expect(panel.locator(".bubble.assistant")).to_have_text("Working on it.")
    box = page.get_by_label("Message")
    expect(box).to_be_editable()

    send(page, "First queued")  # Enter queues while the reply runs
    expect(box).to_have_value("")
    queue = page.get_by_role("region", name="Queue", exact=True)
    expect(queue.locator(".queued-text")).to_have_text(["First queued"])
    expect(page.get_by_role("status").filter(has_text="Queued.")).to_have_text(
        "Queued. 1 message waits for the reply to end."
    )
    box.fill("Second queued")
    panel.get_by_role("button", name="Queue", exact=True).click()
    expect(queue.locator(".queued-text")).to_have_text(["First queued", "Second queued"])
    screenshot(page, "queue-two-waiting")
    for scheme in ("light", "dark"):  # readable and named, as every page (axe-core)
        page.emulate_media(color_scheme=scheme)
        # The list's "Running" badge on the current row's tint included.
        assert axe_violations(page) == [], scheme
    page.set_viewport_size({"width": 390, "height": 800})  # a phone: nothing goes sideways
    expect(panel.get_by_role("button", name="Stop and send")).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth <= innerWidth")
    screenshot(page, "queue-phone")
    page.set_viewport_size({"width": 1280, "height": 800})
    assert len(fake_provider.requests) == 1
    expect(panel.locator(".bubble.user")).to_have_count(1)

    conversation = Conversation.objects.get()
    page.reload()  # the reply still runs: the page follows it again, with its queue
    expect(page).to_have_url(f"/projects/{project.pk}/c/{conversation.pk}/")
    expect(panel.locator(".busy")).to_be_visible()
    expect(queue.locator(".queued-text")).to_have_text(["First queued", "Second queued"])
    assert len(fake_provider.requests) == 1

    gate.set()
    expect(panel.locator(".bubble.assistant")).to_have_text(
        ["Working on it.", "Answer one.", "Answer two."]
    )
    expect(panel.locator(".bubble.user")).to_contain_text(
        ["Write the report", "First queued", "Second queued"]
    )
    expect(queue).to_be_hidden()
    expect(panel.locator(".busy")).to_be_hidden()
    assert [user_texts(r)[-1] for r in fake_provider.requests] == [
        "Write the report",
        "First queued",
        "Second queued",
    ]
    # The second went after the first's answer: the model saw them in that order.
    last = [m.get("content") for m in fake_provider.requests[2]["messages"]]
    assert last.index("First queued") < last.index("Answer one.") < last.index("Second queued")
    assert page.evaluate(QUEUE_KEYS) == []
    assert page.console_errors == []


def test_queued_messages_are_edited_removed_keep_files_and_stop_and_send_goes_first(
    page_for, users, project, fake_provider
):
    """A queued message keeps its `@` file, is edited in place and another removed, by
    keyboard; "Stop and send" stops the held reply and sends the edited one at once."""
    (project_root_create(project.pk) / "notes.md").write_text("ship on friday\n")
    make_rojo(fake_provider.base_url, approval_tools=[])
    gate = threading.Event()
    fake_provider.add(held_reply(gate), stream(*text_chunks("It says friday.")))
    page = page_for(users["editor"])
    page.goto(f"/projects/{project.pk}/")
    send(page, "Start")
    panel = page.locator("rojo-chat-panel")
    expect(panel.locator(".bubble.assistant")).to_have_text("Working on it.")

    box = page.get_by_label("Message")
    box.click()
    box.press_sequentially("When? @no")
    menu = page.get_by_role("listbox", name="Files to attach")
    expect(menu.get_by_role("option")).to_have_text(["notes.md"])
    box.press("Enter")  # picks the file
    expect(box).to_have_value("When? @notes.md ")
    box.press("Enter")  # queues it, with its file
    box.press_sequentially("Drop this one")
    box.press("Enter")
    queue = page.get_by_role("region", name="Queue", exact=True)
    items = queue.locator(".queued-message")
    expect(items).to_have_count(2)
    expect(items.first.locator(".attachment-chip")).to_have_text(["notes.md"])
    expect(page.locator(".composer .attachment-chip")).to_have_count(0)

    queue.get_by_role("button", name="Edit queued item 1").press("Enter")
    editor = queue.get_by_role("textbox", name="Queued item 1")
    expect(editor).to_be_focused()
    editor.fill("When is it? @notes.md")
    editor.press("Enter")
    expect(items.first.locator(".queued-text")).to_have_text("When is it? @notes.md")
    queue.get_by_role("button", name="Remove queued item 2").press("Enter")
    expect(items).to_have_count(1)
    expect(page.get_by_role("status").filter(has_text="removed")).to_have_count(1)
    assert len(fake_provider.requests) == 1

    panel.get_by_role("button", name="Stop and send").click()
    expect(panel.locator(".chat-error.stopped")).to_be_visible()
    gate.set()  # the held stream ends; the turn was stopped before
    expect(panel.locator(".bubble.assistant").last).to_have_text("It says friday.")
    asked = panel.locator(".bubble.user").last
    expect(asked).to_contain_text("When is it? @notes.md")
    expect(asked.locator(".attachment-chip")).to_have_text(["notes.md"])
    assert len(fake_provider.requests) == 2
    sent = user_texts(fake_provider.requests[1])[-1]
    assert sent.startswith("When is it? @notes.md") and "ship on friday" in sent
    expect(queue).to_be_hidden()
    assert page.console_errors == []


def test_the_queue_waits_for_an_approval_and_after_an_error_until_sent_on(
    page_for, users, project, fake_provider, settings
):
    """Nothing queued goes while a call waits for approval (the reply has not ended); the
    reply then fails: the queue stays, paused, until "Send queued"."""
    settings.ROJO_PROVIDER_RETRIES = 0
    (project_root_create(project.pk) / "a.md").write_text("old\n")
    make_rojo(fake_provider.base_url)  # a write over an existing file asks first
    fake_provider.add(
        stream(*tool_call_chunks([("write_text_content", {"path": "a.md", "text": "A\n"})])),
        http_error(500),
        stream(*text_chunks("Here is the summary.")),
    )
    page = page_for(users["editor"])
    page.goto(f"/projects/{project.pk}/")
    send(page, "Write the page")
    panel = page.locator("rojo-chat-panel")
    approve = panel.get_by_role("button", name="Approve")
    expect(approve).to_be_visible()
    send(page, "Now summarise it")
    queue = page.get_by_role("region", name="Queue", exact=True)
    expect(queue.locator(".queued-text")).to_have_text(["Now summarise it"])
    assert len(fake_provider.requests) == 1

    approve.click()
    expect(panel.locator(".chat-error")).to_be_visible()
    expect(panel.locator(".busy")).to_be_hidden()
    resume = queue.get_by_role("button", name="Send queued")
    expect(resume).to_be_visible()
    expect(queue.locator(".queue-note")).to_contain_text("ended with an error")
    assert len(fake_provider.requests) == 2
    expect(panel.locator(".bubble.user")).to_have_count(1)

    resume.click()
    expect(panel.locator(".bubble.assistant").last).to_have_text("Here is the summary.")
    assert user_texts(fake_provider.requests[2])[-1] == "Now summarise it"
    expect(queue).to_be_hidden()
    assert page.console_errors == []


def test_a_queue_stays_with_its_conversation_and_waits_after_a_plain_stop(
    page_for, users, project, fake_provider
):
    """Queued in one conversation, the message is not in a new one, and is there again back
    in its own; a plain Stop (not "Stop and send") leaves it queued until "Send queued"."""
    make_rojo(fake_provider.base_url, approval_tools=[])
    gate = threading.Event()
    fake_provider.add(held_reply(gate), stream(*text_chunks("Sent on.")))
    page = page_for(users["editor"])
    page.goto(f"/projects/{project.pk}/")
    send(page, "Write the report")
    panel = page.locator("rojo-chat-panel")
    expect(panel.locator(".bubble.assistant")).to_have_text("Working on it.")
    send(page, "Then this")
    queue = page.get_by_role("region", name="Queue", exact=True)
    expect(queue.locator(".queued-text")).to_have_text(["Then this"])
    conversation = Conversation.objects.get()

    page.get_by_role("link", name="+ New conversation").click()
    expect(page).to_have_url(f"/projects/{project.pk}/")
    expect(page.get_by_label("Message")).to_be_editable()
    expect(panel.locator(".queued-message")).to_have_count(0)
    page.goto(f"/projects/{project.pk}/c/{conversation.pk}/")
    expect(panel.locator(".busy")).to_be_visible()
    expect(queue.locator(".queued-text")).to_have_text(["Then this"])

    panel.get_by_role("button", name="Stop", exact=True).click()
    expect(panel.locator(".chat-error.stopped")).to_be_visible()
    gate.set()  # the held stream ends; the turn was stopped before
    expect(queue.locator(".queue-note")).to_have_text("Stopped: the queue waits.")
    expect(panel.locator(".busy")).to_be_hidden()
    assert len(fake_provider.requests) == 1
    queue.get_by_role("button", name="Send queued").click()
    expect(panel.locator(".bubble.assistant").last).to_have_text("Sent on.")
    assert user_texts(fake_provider.requests[1])[-1] == "Then this"
    expect(queue).to_be_hidden()
    assert page.console_errors == []


def test_a_new_conversations_queue_goes_to_the_id_its_start_gives(
    page_for, users, project, fake_provider
):
    """A message queued before the first reply has started (the new conversation has no id
    yet: its request is held on the way) is kept under "new", then under the id START gives,
    and sent after that reply."""
    make_rojo(fake_provider.base_url, approval_tools=[])
    gate = threading.Event()
    fake_provider.add(held_reply(gate), stream(*text_chunks("Second answered.")))
    page = page_for(users["editor"])
    held = []
    page.route("**/api/projects/*/chat", lambda route: held.append(route))
    page.goto(f"/projects/{project.pk}/")
    send(page, "First")
    send(page, "Second")  # the first is on its way: this one queues
    queue = page.get_by_role("region", name="Queue", exact=True)
    expect(queue.locator(".queued-text")).to_have_text(["Second"])
    assert page.evaluate(QUEUE_KEYS) == [f"rojo-chat:queue:editor:{project.pk}:new"]
    for _ in range(100):  # the route's event comes with the page's next messages
        if held:
            break
        page.evaluate("0")
    assert len(held) == 1
    held[0].continue_()
    page.unroute("**/api/projects/*/chat")  # the queued one goes straight

    panel = page.locator("rojo-chat-panel")
    expect(panel.locator(".bubble.assistant")).to_have_text("Working on it.")
    conversation = Conversation.objects.get()
    expect(page).to_have_url(f"/projects/{project.pk}/c/{conversation.pk}/")
    assert page.evaluate(QUEUE_KEYS) == [f"rojo-chat:queue:editor:{project.pk}:{conversation.pk}"]
    gate.set()
    expect(panel.locator(".bubble.assistant")).to_have_text(["Working on it.", "Second answered."])
    assert [user_texts(r)[-1] for r in fake_provider.requests] == ["First", "Second"]
    assert page.evaluate(QUEUE_KEYS) == []
    assert page.console_errors == []
