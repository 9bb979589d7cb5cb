"""The page re-attaching to a reply whose stream broke: it tries again after 1 s, 2 s, 4 s …
(capped), saying "Reconnecting…" meanwhile, and shows the whole reply once it gets through."""

import re

import pytest
from playwright.sync_api import expect

from tests.support.fake_provider import stream, text_chunks
from tests.support.helpers import make_rojo

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WORDS = " ".join(f"word{i}" for i in range(12))
FAILED_TRIES = 3


def test_a_broken_stream_is_reattached_with_growing_delays_and_a_visible_note(
    page_for, users, project, fake_provider
):
    """The chat's stream ends after two events; the first re-attach comes 1 s later, and as
    three fail the next come 2, 4 and 8 s apart with "Reconnecting…" shown; the fourth gets
    the rest."""
    make_rojo(fake_provider.base_url)
    fake_provider.add(stream(*text_chunks(WORDS, pieces=12)))
    page = page_for(users["editor"])
    page.goto(f"/projects/{project.pk}/")
    panel = page.locator("rojo-chat-panel")
    tries: list[str] = []

    def cut_short(route):
        body = route.fetch().text()  # the whole turn, run on the server
        head = "\n\n".join(body.split("\n\n")[:3]) + "\n\n"  # START and two CHAT, no DONE
        route.fulfill(status=200, headers={"content-type": "text/event-stream"}, body=head)

    def fail_some(route):
        tries.append(route.request.url)
        if len(tries) <= FAILED_TRIES:
            route.abort()
        else:
            route.continue_()

    page.route(re.compile(r"/api/projects/\d+/chat$"), cut_short)
    page.route(re.compile(r"/api/conversations/\d+/stream"), fail_some)
    page.evaluate(
        """() => {
            window.announced = []; // each "next try in N s" the note says, in order
            const note = document.querySelector("rojo-chat-panel .busy");
            new MutationObserver(() => {
                const wait = note.textContent.match(/next try in (\\d+) s/);
                if (wait) window.announced.push(Number(wait[1]));
            }).observe(note, { characterData: true, childList: true, subtree: true });
        }"""
    )
    page.get_by_label("Message").fill("Count.")
    page.keyboard.press("Enter")

    expect(panel.locator(".busy")).to_contain_text("Reconnecting…")
    expect(panel.locator(".bubble.assistant")).to_have_text(WORDS, timeout=20_000)
    expect(panel.locator(".busy")).to_be_hidden()

    assert len(tries) == FAILED_TRIES + 1
    # The waits before each try, as the page timed and said them (the clock of a loaded
    # machine would say 2.6 s for 2).
    assert page.evaluate("window.announced") == [1, 2, 4, 8]
    failed_loads = ["Failed to load resource: net::ERR_FAILED"] * FAILED_TRIES
    assert page.console_errors == failed_loads  # the aborted tries, and nothing else
