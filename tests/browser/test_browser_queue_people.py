"""A queue is its person's, in Chromium: messages one person queued in a shared browser (a
meeting room's, a colleague's) are neither shown to nor sent by whoever signs in after them."""

import threading
from urllib.parse import urlsplit

import pytest
from django.conf import settings
from django.test import Client
from playwright.sync_api import expect

from rojos.models import Conversation
from tests.support.fake_provider import Gate, chunk, stream, text_chunks
from tests.support.helpers import make_rojo
from tests.support.live_server import wait_until

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

DRAFT = "The editor's draft, for nobody else"


def send(page, text: str) -> None:
    page.get_by_label("Message").fill(text)
    page.get_by_label("Message").press("Enter")


def signed_in_as(page, user) -> None:
    """Sign `user` in in the page's browser, as a login there would."""
    client = Client()
    client.force_login(user)
    session = client.cookies[settings.SESSION_COOKIE_NAME].value
    origin = "{0.scheme}://{0.netloc}/".format(urlsplit(page.url))
    page.context.add_cookies(
        [{"name": settings.SESSION_COOKIE_NAME, "value": session, "url": origin}]
    )


def test_a_queue_left_by_one_person_is_not_the_next_ones_in_the_same_browser(
    page_for, users, project, fake_provider
):
    """The editor queues a message while a reply runs and logs out; the owner signs in in
    the same browser and opens that conversation: the editor's message is not under the log,
    and the owner's own message is answered without it being sent."""
    make_rojo(fake_provider.base_url, approval_tools=[])
    gate = threading.Event()
    fake_provider.add(
        stream(*text_chunks("Working on it.", finish=None), Gate(gate), chunk({}, "stop")),
        stream(*text_chunks("Answered for the owner.")),
    )
    page = page_for(users["editor"])
    page.goto(f"/projects/{project.pk}/")
    send(page, "Write the report")
    panel = page.locator("rojo-chat-panel")
    expect(panel.locator(".bubble.assistant")).to_have_text("Working on it.")
    send(page, DRAFT)
    queue = page.get_by_role("region", name="Queue", exact=True)
    expect(queue.locator(".queued-text")).to_have_text([DRAFT])
    conversation = Conversation.objects.get()
    page.get_by_role("button", name="Log out").click()
    expect(page.get_by_role("button", name="Log out")).to_have_count(0)
    gate.set()  # the editor's reply ends with no page of theirs to send the queue
    wait_until(lambda: not Conversation.objects.get(pk=conversation.pk).running)

    signed_in_as(page, users["owner"])
    page.goto(f"/projects/{project.pk}/c/{conversation.pk}/")
    expect(page.get_by_label("Message")).to_be_editable()
    expect(panel.locator(".queued-message")).to_have_count(0)
    expect(page.get_by_text(DRAFT)).to_have_count(0)
    send(page, "The owner's question")
    expect(panel.locator(".bubble.assistant").last).to_have_text("Answered for the owner.")

    assert [m["content"] for m in fake_provider.requests[1]["messages"] if m["role"] == "user"][
        -1
    ].endswith("The owner's question")
    assert all(DRAFT not in str(request["messages"]) for request in fake_provider.requests)
    assert page.console_errors == []
