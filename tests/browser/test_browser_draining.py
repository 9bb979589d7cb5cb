"""A message sent to a server that is restarting (roject/server/graceful.py: it refuses new
turns with 503, code `draining`, before storing anything) is sent again by the page itself,
the bubble kept in place with a status line, until a server takes it; for up to 30 s, and
Stop ends the waiting, the message back in the box."""

import re
import time

import pytest
from playwright.sync_api import expect

from rojos.models import Message
from tests.support.fake_provider import stream, text_chunks
from tests.support.helpers import make_rojo

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ASKED = "Sent during a restart."
REPLY = "Answered once."
CHAT = re.compile(r"/api/projects/\d+/chat$")


@pytest.fixture
def draining(monkeypatch):
    """draining(True or False): the live server's process refuses new turns, or takes them
    again (the flag SIGTERM sets under `manage.py serve`: roject/server/draining.py)."""

    def set_draining(on: bool) -> None:
        monkeypatch.setattr("roject.server.draining._draining", on)

    return set_draining


def chat_answers(page) -> list[int]:
    """The statuses of the page's chat requests, in order, as they come."""
    statuses: list[int] = []
    page.on("response", lambda r: statuses.append(r.status) if CHAT.search(r.url) else None)
    return statuses


def wait_for(page, condition, seconds: float = 30) -> None:
    """Until `condition()`, letting the page's events in meanwhile."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "never happened"
        page.wait_for_timeout(100)


def resending(panel):
    """The status line of a message being sent again."""
    return panel.get_by_role("status").filter(has_text="server is restarting")


def sent_while_draining(page_for, users, project, draining, *, clock: bool = False):
    """The editor's page, its chat panel and its chat requests' statuses, once a message was
    sent while the server refuses new turns and the page says it is sending it again;
    `clock`: the page's clock is the test's."""
    page = page_for(users["editor"])
    page.goto(f"/projects/{project.pk}/")
    panel = page.locator("rojo-chat-panel")
    answers = chat_answers(page)
    if clock:
        page.clock.install()
    draining(True)
    page.get_by_label("Message").fill(ASKED)
    page.keyboard.press("Enter")
    expect(resending(panel)).to_be_visible()
    return page, panel, answers


def test_a_message_refused_while_the_server_restarts_is_sent_again_and_answered_once(
    page_for, users, project, fake_provider, draining
):
    make_rojo(fake_provider.base_url)
    fake_provider.add(stream(*text_chunks(REPLY)))
    page, panel, answers = sent_while_draining(page_for, users, project, draining)
    expect(panel.locator(".bubble.user")).to_have_text(ASKED)
    wait_for(page, lambda: len(answers) >= 2)  # refused twice, a couple of seconds apart
    draining(False)

    expect(panel.locator(".bubble.assistant")).to_have_text(REPLY, timeout=20_000)
    expect(resending(panel)).to_have_count(0)
    expect(panel.locator(".chat-error")).to_have_count(0)
    expect(page.get_by_label("Message")).to_have_value("")
    expect(panel.locator(".bubble.user")).to_have_text([ASKED])
    assert answers[-1] == 200 and set(answers[:-1]) == {503}, answers
    assert list(Message.objects.filter(role="user").values_list("content", flat=True)) == [ASKED]
    assert len(fake_provider.requests) == 1


def test_a_message_still_refused_after_the_time_given_comes_back_to_the_box(
    page_for, users, project, fake_provider, draining
):
    """The page's clock is the test's: the 30 s pass as fast as the refusals come."""
    make_rojo(fake_provider.base_url)
    page, panel, answers = sent_while_draining(page_for, users, project, draining, clock=True)
    for _ in range(200):  # a refusal's wait passes; the next try, refused, waits again
        if panel.locator(".chat-error").count():
            break
        page.clock.run_for(2000)

    expect(panel.locator(".chat-error")).to_contain_text("restarting")
    expect(page.get_by_label("Message")).to_have_value(ASKED)
    expect(panel.locator(".bubble.user")).to_have_count(0)
    expect(resending(panel)).to_have_count(0)
    assert len(answers) >= 2 and set(answers) == {503}, answers  # sent again, then given up
    assert not Message.objects.exists()


def test_stop_while_a_refused_message_waits_puts_it_back_in_the_box(
    page_for, users, project, fake_provider, draining
):
    """Nothing is sent after Stop: sent by hand once the server takes turns again, the
    message is stored once."""
    make_rojo(fake_provider.base_url)
    fake_provider.add(stream(*text_chunks(REPLY)))
    page, panel, answers = sent_while_draining(page_for, users, project, draining)
    panel.get_by_role("button", name="Stop").click()

    expect(page.get_by_label("Message")).to_have_value(ASKED)
    expect(panel.locator(".bubble.user")).to_have_count(0)
    expect(resending(panel)).to_have_count(0)
    refused = len(answers)
    draining(False)
    page.keyboard.press("Enter")  # the box kept the focus
    expect(panel.locator(".bubble.assistant")).to_have_text(REPLY, timeout=20_000)
    expect(page.get_by_label("Message")).to_have_value("")
    assert answers == [503] * refused + [200], answers
    assert list(Message.objects.filter(role="user").values_list("content", flat=True)) == [ASKED]
