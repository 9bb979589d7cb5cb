"""The page whose new chat got no answer (its server stopped after storing the message,
before the reply started) opens the conversation its message went to, on reload."""

import asyncio
import contextlib
import re
import threading

import pytest
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import expect

from rojos.models import Conversation, Message
from rojos.turns import start as turn_start
from tests.support.helpers import make_rojo

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ASKED = "Where did my message go?"


class HeldLayer:
    """A channel layer whose turns get no channel until released: the start stops after
    the message is stored, as a server killed there would; released, it fails."""

    def __init__(self) -> None:
        self.release = threading.Event()

    async def new_channel(self, *args, **kwargs) -> str:
        await asyncio.to_thread(self.release.wait, 30)
        raise RuntimeError("the test's held start")


@pytest.fixture
def held_start(monkeypatch, settings):
    # A claim of a process still alive here goes stale after ten times this (rojos.models.claims).
    settings.ROJO_TURN_STALE_SECONDS = 0.3
    layer = HeldLayer()
    monkeypatch.setattr(turn_start, "control_layer", lambda: layer)
    yield layer
    layer.release.set()


def test_a_chat_cut_off_before_start_is_opened_on_reload(
    page_for, users, project, fake_provider, held_start
):
    make_rojo(fake_provider.base_url)
    page = page_for(users["editor"])
    page.goto(f"/projects/{project.pk}/")
    lookups: list[str] = []

    def connection_lost(route):
        with contextlib.suppress(PlaywrightError):  # stored; no answer ever comes
            route.fetch(timeout=2500)
        route.abort("connectionreset")

    def server_cannot_say(route):
        lookups.append(route.request.url)
        route.abort()  # the first lookup fails too: the key is kept for a reload

    page.route(re.compile(r"/api/projects/\d+/chat$"), connection_lost)
    page.route(re.compile(r"/api/projects/\d+/conversations\?key="), server_cannot_say)
    page.get_by_label("Message").fill(ASKED)
    page.keyboard.press("Enter")
    expect(page.locator(".chat-error")).to_contain_text("could not be reached", timeout=10_000)
    assert len(lookups) == 1
    conversation = Conversation.objects.get()
    assert list(Message.objects.values_list("content", flat=True)) == [ASKED]

    page.unroute(re.compile(r"/api/projects/\d+/conversations\?key="))
    page.reload()

    expect(page).to_have_url(re.compile(rf"/projects/{project.pk}/c/{conversation.pk}/$"))
    panel = page.locator("rojo-chat-panel")
    expect(panel.locator(".bubble.user")).to_have_text(ASKED, timeout=20_000)
    expect(panel.locator(".chat-error")).to_contain_text("server running this reply stopped")
    current = page.locator(".conversation-list li[aria-current='page']")
    expect(current).to_have_attribute("data-id", str(conversation.pk))
    # Found once: another reload opens the plain new-chat page.
    page.goto(f"/projects/{project.pk}/")
    expect(page).to_have_url(re.compile(rf"/projects/{project.pk}/$"))
