"""A turn's stream followed by someone other than the turn's user (a colleague re-attached
with `GET /api/conversations/<id>/stream`) ends soon after that follower loses access: removed
from the project, deactivated, their API token revoked or their session logged out. Before,
it went on carrying the turn's tool results (the project's files) until the turn ended."""

import threading

import pytest

from roject.identity.tokens import api_token_create, api_token_revoke
from roject.models import Membership
from roject.storage import project_root_create
from tests.support.fake_provider import Gate, Pause, stream, text_chunks, tool_call_chunks
from tests.support.helpers import make_rojo
from tests.support.live_server import parse_sse, read_until

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "the project's secret plans"


def _follower(client_for, viewer, revoked: str):
    """A client of the viewer, by session or by API token; and how to take its access."""
    if revoked == "token revoked":
        made = api_token_create(user=viewer, name="follower")
        client = client_for()
        client.http.headers["Authorization"] = f"Bearer {made.secret}"
        return client, lambda: api_token_revoke(user=viewer, token_id=made.token.pk)
    client = client_for(viewer)
    if revoked == "membership":
        return client, lambda: Membership.objects.filter(user=viewer).delete()
    if revoked == "user deactivated":
        return client, lambda: type(viewer).objects.filter(pk=viewer.pk).update(is_active=False)
    return client, lambda: client.post("/logout/", follow_redirects=False)


@pytest.mark.parametrize(
    "revoked", ["membership", "user deactivated", "token revoked", "session logged out"]
)
def test_a_follower_who_loses_access_reads_nothing_more_of_the_turn(
    client_for, users, project, fake_provider, settings, revoked
):
    """The call waits at a gate until access was taken (before, a 1.5 s pause the test had
    to take it within); the stream is checked at every event, so the call's is the first
    the follower is not sent."""
    settings.ROJO_PROVIDER_RETRIES = 0
    settings.ROJO_LIVE_CHECK_SECONDS = 0
    root = project_root_create(project.pk)
    (root / "secret.txt").write_text(SECRET)
    rojo = make_rojo(fake_provider.base_url, approval_tools=[])
    taken = threading.Event()
    fake_provider.add(
        stream(
            text_chunks("Let me look.", finish=None),
            Gate(taken),
            tool_call_chunks([("get_text_content", {"path": "secret.txt"})]),
        ),
        stream(*text_chunks("Done.")),
    )
    follower, take_access = _follower(client_for, users["viewer"], revoked)
    editor = client_for(users["editor"])
    with editor.chat_stream(project.pk, rojo=rojo.slug, message="Read it") as mine:
        own = parse_sse(mine.iter_lines())
        conversation = next(own).data["conversation"]
        url = f"/api/conversations/{conversation}/stream"
        with follower.http.stream("GET", url) as response:
            assert response.status_code == 200
            events = parse_sse(response.iter_lines())
            read_until(events, "CHAT")  # following the turn, as its page does
            take_access()
            taken.set()
            rest = list(events)
        mine_rest = list(own)
    assert SECRET not in "".join(str(e.data) for e in rest), "the stream went on"
    assert "DONE" not in [e.type for e in rest]
    # The turn's own user still gets all of it.
    results = [e.data["result"] for e in mine_rest if e.type == "TOOL_RESULT"]
    assert SECRET in str(results)
    assert mine_rest[-1].type == "DONE"


def test_a_follower_who_keeps_access_follows_to_the_end(
    client_for, users, project, fake_provider, settings
):
    """The check ends only streams that must end: a member who stays a member, checked
    many times over the turn, reads it to its DONE."""
    settings.ROJO_PROVIDER_RETRIES = 0
    settings.ROJO_LIVE_CHECK_SECONDS = 0.1
    root = project_root_create(project.pk)
    (root / "secret.txt").write_text(SECRET)
    rojo = make_rojo(fake_provider.base_url, approval_tools=[])
    fake_provider.add(
        stream(
            text_chunks("Let me look.", finish=None),
            Pause(0.5),
            tool_call_chunks([("get_text_content", {"path": "secret.txt"})]),
        ),
        stream(*text_chunks("Done.")),
    )
    editor = client_for(users["editor"])
    with editor.chat_stream(project.pk, rojo=rojo.slug, message="Read it") as mine:
        conversation = next(parse_sse(mine.iter_lines())).data["conversation"]
        url = f"/api/conversations/{conversation}/stream"
        with client_for(users["viewer"]).http.stream("GET", url) as response:
            events = list(parse_sse(response.iter_lines()))
    assert events[-1].type == "DONE"
    assert SECRET in "".join(str(e.data) for e in events if e.type == "TOOL_RESULT")
