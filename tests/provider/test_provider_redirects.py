"""A provider's redirect is not followed: a turn's request (the conversation, the files it
read, the rojo's key) goes only to the base URL an administrator set, never to an address a
provider's answer names, on another host, an internal one, or the same host over plain HTTP."""

import pytest

from rojos.models import Message
from tests.support.fake_provider import http_error
from tests.support.helpers import make_rojo
from tests.support.http_peers import http_peer

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "The launch code is 0000; keep it in this conversation."


@pytest.fixture
def rojo(fake_provider, settings):
    settings.ROJO_PROVIDER_RETRIES = 0
    return make_rojo(fake_provider.base_url)


@pytest.mark.parametrize("status", [307, 308, 302])
def test_a_redirect_sends_nothing_where_it_points_and_fails_the_turn_saying_so(
    client_for, users, project, rojo, fake_provider, status
):
    """A 307 or 308 would send the same POST, body and all, to the address the provider
    names (a 302 the URL as a GET): it reaches no one, and the turn ends saying the
    provider redirected."""
    with http_peer("127.0.0.2") as elsewhere:
        elsewhere.answer("POST", "/steal/chat/completions", 200, {})
        elsewhere.answer("GET", "/steal/chat/completions", 200, {})
        location = f"{elsewhere.base_url}/steal/chat/completions"
        fake_provider.add(http_error(status, "", {"Location": location}))

        events = client_for(users["editor"]).chat(project.pk, rojo=rojo.slug, message=SECRET)

    assert elsewhere.seen == []
    assert [e.type for e in events] == ["START", "ERROR", "DONE"]
    error = events[1].data["message"]
    assert f"answered {status}" in error and "redirect" in error, error
    assert fake_provider.requests[-1]["messages"][-1]["content"].endswith(SECRET)
    # The user's message is kept, to send again once the base URL is right.
    assert Message.objects.filter(role="user", content__endswith=SECRET).count() == 1
