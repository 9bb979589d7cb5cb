"""The owner's live approval count while the server cannot reach its relay: the page is
told (`ERROR`, code `unavailable`), says so on the Approvals link, connects again after a
delay, and shows the count once the stream works again."""

import json
import re

import pytest
from playwright.sync_api import expect

from rojos.approvals.live import live_unavailable

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

DOWN_TRIES = 2


def test_the_live_count_says_reconnecting_while_the_relay_is_down_and_recovers(
    page_for, users, project
):
    owner = page_for(users["owner"])
    tries: list[str] = []
    down = live_unavailable()
    body = f"event: ERROR\ndata: {json.dumps(down['data'] | {'retry': 1})}\n\n"

    def relay_down_at_first(route):
        tries.append(route.request.url)
        if len(tries) <= DOWN_TRIES:  # what the server sends while Redis is down
            route.fulfill(status=200, headers={"content-type": "text/event-stream"}, body=body)
        else:
            route.continue_()

    owner.route(re.compile(r"/api/approvals/live$"), relay_down_at_first)
    owner.goto("/approvals/")
    link = owner.locator(".approvals-link")

    expect(link).to_have_attribute("data-live", "reconnecting")
    expect(link).to_have_attribute("title", down["data"]["message"])
    expect(link).to_have_attribute("data-live", "connected", timeout=20_000)
    expect(link).not_to_have_attribute("title", re.compile("."))
    expect(owner.locator(".approvals-count")).to_have_attribute("data-count", "0")
    assert len(tries) == DOWN_TRIES + 1
