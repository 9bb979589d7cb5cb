"""Edit, regenerate, retry and the `< 2/3 >` branch switch in Chromium, as a person uses them."""

import threading

import pytest
from playwright.sync_api import expect

from rojos.models import Message
from tests.support.browser import screenshot
from tests.support.fake_provider import Gate, chunk, http_error, stream, text_chunks
from tests.support.helpers import make_rojo

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def rojo(fake_provider, settings):
    settings.ROJO_PROVIDER_RETRIES = 0
    return make_rojo(fake_provider.base_url)


def reply(text: str):
    return stream(*text_chunks(text, pieces=3), delay=0.01)


def send(page, text: str) -> None:
    page.get_by_label("Message").fill(text)
    page.keyboard.press("Enter")
    expect(page.locator("rojo-chat-panel .busy")).to_be_hidden()


def user_texts(request: dict) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "user"]


def test_editing_a_message_forks_and_the_switch_shows_either_branch(
    page_for, users, project, rojo, fake_provider
):
    """Edit the first question: the later turn goes, the new reply comes, `2/2` shows; Previous
    brings back the old question with both its replies, and a reload keeps the choice."""
    fake_provider.add(reply("Paris."), reply("About 2 million."), reply("Rome."))
    page = page_for(users["editor"])
    page.goto(f"/projects/{project.pk}/")
    send(page, "Capital of France?")
    send(page, "Its population?")
    panel = page.locator("rojo-chat-panel")
    expect(panel.locator(".bubble.assistant")).to_have_text(["Paris.", "About 2 million."])

    panel.locator(".message-tools").first.get_by_role("button", name="Edit and send again").click()
    box = panel.get_by_label("Edited text")
    expect(box).to_have_value("Capital of France?")
    box.fill("Capital of Italy?")
    box.press("Enter")
    expect(panel.locator(".busy")).to_be_hidden()
    expect(panel.locator(".bubble.user")).to_have_text(["Capital of Italy?"])
    expect(panel.locator(".bubble.assistant")).to_have_text(["Rome."])
    assert user_texts(fake_provider.requests[-1]) == ["Capital of Italy?"]
    switch = panel.locator(".branch-switch")
    expect(switch.locator(".branch-position")).to_have_text("2/2")
    screenshot(page, "branches-edited")

    switch.get_by_role("button", name="Previous version").click()
    expect(panel.locator(".bubble.user")).to_have_text(["Capital of France?", "Its population?"])
    expect(panel.locator(".bubble.assistant")).to_have_text(["Paris.", "About 2 million."])
    expect(panel.locator(".branch-position")).to_have_text("1/2")
    expect(switch.get_by_role("button", name="Previous version")).to_be_disabled()
    screenshot(page, "branches-switched")

    page.reload()
    expect(page.locator("rojo-chat-panel .bubble.assistant")).to_have_text(
        ["Paris.", "About 2 million."]
    )
    page.locator(".branch-switch").get_by_role("button", name="Next version").click()
    expect(page.locator("rojo-chat-panel .bubble.assistant")).to_have_text(["Rome."])
    assert page.console_errors == []


def test_retry_after_a_provider_error_then_regenerate(
    page_for, users, project, rojo, fake_provider
):
    """A reply that failed offers Retry, one click; the retry's reply shows with `2/2`;
    Regenerate then asks once more (`3/3`), sending the question once each time."""
    fake_provider.add(http_error(500), reply("First try."), reply("Second try."))
    page = page_for(users["editor"])
    page.goto(f"/projects/{project.pk}/")
    send(page, "Summarise the docs")
    panel = page.locator("rojo-chat-panel")
    expect(panel.locator(".chat-error")).to_be_visible()
    screenshot(page, "branches-retry-offered")

    panel.get_by_role("button", name="Send this question again").click()
    expect(panel.locator(".busy")).to_be_hidden()
    expect(panel.locator(".bubble.assistant")).to_have_text(["First try."])
    expect(panel.locator(".chat-error")).to_have_count(0)
    expect(panel.locator(".branch-position")).to_have_text("2/2")
    assert user_texts(fake_provider.requests[-1]) == ["Summarise the docs"]

    panel.get_by_role("button", name="Ask for another reply to this question").click()
    expect(panel.locator(".busy")).to_be_hidden()
    expect(panel.locator(".bubble.assistant")).to_have_text(["Second try."])
    expect(panel.locator(".branch-position")).to_have_text("3/3")
    assert user_texts(fake_provider.requests[-1]) == ["Summarise the docs"]
    assert Message.objects.filter(role="user").count() == 3
    screenshot(page, "branches-regenerated")

    panel.get_by_role("button", name="Previous version").click()
    expect(panel.locator(".bubble.assistant")).to_have_text(["First try."])
    panel.get_by_role("button", name="Previous version").click()
    expect(panel.locator(".chat-error")).to_be_visible()  # the failed attempt, kept
    expect(panel.get_by_role("button", name="Send this question again")).to_be_visible()
    assert page.console_errors == []


def test_stop_then_retry_in_one_click(page_for, users, project, rojo, fake_provider):
    """A reply stopped half-way offers Retry; it sends the question again. The reply holds
    half-way until it is stopped, so a slow Stop cannot let it end first."""
    held = threading.Event()
    chunks = text_chunks("w " * 200, pieces=200)
    fake_provider.add(
        stream(*chunks[:100], Gate(held), *chunks[100:], delay=0.05), reply("Done this time.")
    )
    page = page_for(users["editor"])
    page.goto(f"/projects/{project.pk}/")
    page.get_by_label("Message").fill("Write a long story")
    page.keyboard.press("Enter")
    panel = page.locator("rojo-chat-panel")
    expect(panel.locator(".bubble.assistant")).to_contain_text("w w")
    panel.get_by_role("button", name="Stop").click()
    expect(panel.locator(".busy")).to_be_hidden()
    held.set()  # the stopped turn hung up: nothing more reaches the page
    panel.get_by_role("button", name="Send this question again").click()
    expect(panel.locator(".busy")).to_be_hidden()
    expect(panel.locator(".bubble.assistant")).to_have_text(["Done this time."])
    assert page.console_errors == []


def test_an_edit_with_no_text_sends_nothing_and_keeps_the_message_editable(
    page_for, users, project, rojo, fake_provider
):
    """Enter in an emptied edit box sends nothing: the box stays, and Cancel shows the
    message again with its Edit (it used to leave the message with no Edit at all)."""
    fake_provider.add(reply("Paris."))
    page = page_for(users["editor"])
    page.goto(f"/projects/{project.pk}/")
    send(page, "Capital of France?")
    panel = page.locator("rojo-chat-panel")
    expect(panel.locator(".bubble.assistant")).to_have_text("Paris.")

    panel.get_by_role("button", name="Edit and send again").click()
    box = panel.get_by_label("Edited text")
    box.fill("   ")
    box.press("Enter")
    expect(box).to_be_visible()
    box.press("Escape")
    expect(panel.locator(".bubble.user")).to_have_text(["Capital of France?"])
    expect(panel.get_by_role("button", name="Edit and send again")).to_have_count(1)
    assert len(fake_provider.requests) == 1


def test_an_edit_sent_while_a_reply_runs_keeps_its_text(
    page_for, users, project, rojo, fake_provider
):
    """An edit box opened before a reply started keeps what was typed in it when Enter is
    pressed while the reply runs (it was dropped, with the message's Edit), and sends it once
    the reply is over."""
    gate = threading.Event()
    held = stream(*text_chunks("Working.", finish=None), Gate(gate), chunk({}, "stop"))
    fake_provider.add(reply("Paris."), held, reply("Rome."))
    page = page_for(users["editor"])
    page.goto(f"/projects/{project.pk}/")
    send(page, "Capital of France?")
    panel = page.locator("rojo-chat-panel")
    panel.get_by_role("button", name="Edit and send again").click()
    box = panel.get_by_label("Edited text")
    box.fill("Capital of Italy?")
    page.get_by_role("textbox", name="Message").fill("And Spain?")
    page.get_by_role("textbox", name="Message").press("Enter")
    expect(panel.locator(".bubble.assistant").last).to_have_text("Working.")

    box.press("Enter")
    expect(box).to_have_value("Capital of Italy?")
    gate.set()
    expect(panel.locator(".busy")).to_be_hidden()
    box.press("Enter")
    expect(panel.locator(".bubble.assistant")).to_have_text(["Rome."])
    assert user_texts(fake_provider.requests[-1]) == ["Capital of Italy?"]


def test_the_regenerate_button_under_a_long_reply_is_in_view(
    page_for, users, project, rojo, fake_provider
):
    """A reader who followed a reply to its end still sees its end once it is over: the
    Regenerate under it was added below the fold."""
    fake_provider.add(reply("\n\n".join(f"Paragraph {n} of a long answer." for n in range(40))))
    page = page_for(users["editor"])
    page.goto(f"/projects/{project.pk}/")
    send(page, "Tell me a lot.")
    regenerate = page.locator("rojo-chat-panel").get_by_role("button", name="Regenerate")
    expect(regenerate).to_be_in_viewport()


def test_a_conversation_opened_at_a_search_hit_switches_branches_at_the_first_click(
    page_for, users, project, rojo, fake_provider
):
    """Opened at a message (a search hit's link), the conversation shows its branch; the
    reader's first switch to another branch then stays (it was switched back to the hit's)."""
    fake_provider.add(reply("Paris."), reply("Rome."))
    page = page_for(users["editor"])
    page.goto(f"/projects/{project.pk}/")
    send(page, "Capital of France?")
    panel = page.locator("rojo-chat-panel")
    panel.get_by_role("button", name="Edit and send again").click()
    panel.get_by_label("Edited text").fill("Capital of Italy?")
    panel.get_by_label("Edited text").press("Enter")
    expect(panel.locator(".bubble.assistant")).to_have_text(["Rome."])
    expect(panel.locator(".busy")).to_be_hidden()
    hit = Message.objects.get(role="assistant", content="Rome.")

    page.goto(f"/projects/{project.pk}/c/{hit.conversation_id}/?message={hit.pk}&q=rome")
    expect(panel.locator(".bubble.assistant.search-hit")).to_have_text("Rome.")
    panel.get_by_role("button", name="Previous version").click()
    expect(panel.locator(".bubble.user")).to_have_text(["Capital of France?"])
    expect(panel.locator(".bubble.assistant")).to_have_text(["Paris."])
    page.wait_for_timeout(1000)  # what the page does after the switch: nothing more
    expect(panel.locator(".bubble.assistant")).to_have_text(["Paris."])
    expect(panel.locator(".branch-position")).to_have_text("1/2")


def test_edit_waits_while_a_reply_runs_even_after_a_reload(
    page_for, users, project, rojo, fake_provider
):
    """While a reply runs, an earlier message's Edit is disabled rather than a button that
    does nothing, also on the page reloaded mid-reply; once the reply ends it works."""
    gate = threading.Event()
    held = stream(*text_chunks("Working.", finish=None), Gate(gate), chunk({}, "stop"))
    fake_provider.add(reply("Paris."), held, reply("Rome."))
    page = page_for(users["editor"])
    page.goto(f"/projects/{project.pk}/")
    send(page, "Capital of France?")
    panel = page.locator("rojo-chat-panel")
    edit = panel.locator(".message-tools").first.get_by_role("button", name="Edit and send again")
    expect(edit).to_be_enabled()

    page.get_by_label("Message").fill("And Spain?")
    page.keyboard.press("Enter")
    expect(panel.locator(".bubble.assistant").last).to_have_text("Working.")
    expect(edit).to_be_disabled()

    page.reload()
    expect(panel.locator(".bubble.assistant").last).to_have_text("Working.")
    expect(panel.locator(".busy")).to_be_visible()
    edits = panel.get_by_role("button", name="Edit and send again")
    expect(edits).to_have_count(2)
    for button in edits.all():
        expect(button).to_be_disabled()

    gate.set()
    expect(panel.locator(".busy")).to_be_hidden()
    edit.click()
    box = panel.get_by_label("Edited text")
    box.fill("Capital of Italy?")
    box.press("Enter")
    expect(panel.locator(".bubble.assistant")).to_have_text(["Rome."])
    assert page.console_errors == []
