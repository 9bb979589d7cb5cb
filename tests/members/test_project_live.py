"""Live for everyone: every recorded change to a project's files (a person's edit, an upload,
a restore, a rojo's call) is published to the project's group and reaches each open page's
stream (`GET /api/projects/<id>/live`), across server processes with Redis."""

import os
import time

import pytest
from django.db import connection

from roject.identity.tokens import api_token_create, api_token_revoke
from roject.models import Membership
from roject.storage import project_root_create
from tests.support.fake_provider import stream, text_chunks, tool_call_chunks
from tests.support.helpers import make_rojo
from tests.support.live_server import parse_sse

pytestmark = pytest.mark.django_db(transaction=True)


def live(client, project):
    """Open the live stream; returns (the response's context, its events) once subscribed."""
    context = client.http.stream("GET", f"/api/projects/{project.pk}/live")
    response = context.__enter__()
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    events = parse_sse(response.iter_lines())
    assert next(events).type == "ready"
    return context, events


def test_a_persons_change_and_a_rojos_reach_another_members_stream(
    client_for, users, project, fake_provider, settings
):
    settings.ROJO_PROVIDER_RETRIES = 0
    project_root_create(project.pk)
    context, events = live(client_for(users["viewer"]), project)
    try:
        editor = client_for(users["editor"])
        made = editor.post(f"/api/projects/{project.pk}/files/new", json={"path": "a.md"})
        event = next(events)
        assert event.type == "files"
        assert event.data == {
            "change": made.json()["change"],
            "paths": ["a.md"],
            "origin": "person",
            "tool": "write_text_content",
            "author": "editor",
        }
        rojo = make_rojo(fake_provider.base_url, approval_tools=[])
        fake_provider.add(
            stream(*tool_call_chunks([("write_text_content", {"path": "b.md", "text": "B"})])),
            stream(*text_chunks("Done.")),
        )
        editor.chat(project.pk, rojo=rojo.slug, message="Write b.md")
        event = next(events)
        assert (event.data["paths"], event.data["origin"], event.data["author"]) == (
            ["b.md"],
            "rojo",
            "editor",
        )
    finally:
        context.__exit__(None, None, None)


def test_the_live_stream_of_another_project_is_404(client_for, users, project):
    response = client_for(users["outsider"]).get(f"/api/projects/{project.pk}/live")
    assert response.status_code == 404
    assert client_for().get(f"/api/projects/{project.pk}/live").status_code == 401


def test_a_change_on_one_process_reaches_a_page_served_by_another(
    server_process, client_for, users, project
):
    """Two server processes on PostgreSQL and Redis: the stream is served by the second, the
    upload is made on the first (the test's own server)."""
    if not os.environ.get("REDIS_URL") or connection.vendor != "postgresql":
        pytest.skip("the cross-process live stream runs with REDIS_URL and PostgreSQL")
    other = server_process()
    project_root_create(project.pk)
    context, events = live(client_for(users["viewer"], base_url=other.base_url), project)
    try:
        client_for(users["editor"]).post(
            f"/api/projects/{project.pk}/files/upload",
            params={"path": "up.bin"},
            content=b"x" * 1000,
            headers={"Content-Type": "application/octet-stream"},
        )
        event = next(events)
        assert (event.data["paths"], event.data["origin"]) == (["up.bin"], "upload")
    finally:
        context.__exit__(None, None, None)


@pytest.mark.parametrize(
    "revoked", ["membership", "user deactivated", "token revoked", "session logged out"]
)
def test_a_busy_stream_ends_soon_after_access_is_revoked(
    client_for, users, project, settings, revoked
):
    """The project changes more often than the keep-alive interval, so the stream is never
    idle: it still ends within a few ROJO_LIVE_CHECK_SECONDS of the viewer's removal, the
    viewer's deactivation, the revocation of the token it was opened with, or the logout of
    the session it was opened with (before, a logged-out page went on reading)."""
    settings.ROJO_LIVE_CHECK_SECONDS = 0.3
    project_root_create(project.pk)
    viewer = users["viewer"]
    made = api_token_create(user=viewer, name="feed")
    if revoked == "session logged out":
        reader = client_for(viewer)
    else:
        reader = client_for()
        reader.http.headers["Authorization"] = f"Bearer {made.secret}"
    context, events = live(reader, project)
    editor = client_for(users["editor"])
    count = iter(range(10_000))

    def change():
        path = f"f{next(count)}.md"
        assert editor.post(f"/api/projects/{project.pk}/files/new", json={"path": path}).is_success

    try:
        change()
        assert next(events).type == "files"
        if revoked == "membership":
            Membership.objects.filter(user=viewer, project=project).delete()
        elif revoked == "user deactivated":
            type(viewer).objects.filter(pk=viewer.pk).update(is_active=False)
        elif revoked == "session logged out":
            assert reader.post("/logout/", follow_redirects=False).status_code == 302
        else:
            api_token_revoke(user=viewer, token_id=made.token.pk)
        deadline, ended = time.monotonic() + 6, False
        while time.monotonic() < deadline and not ended:
            change()
            try:
                next(events)
            except StopIteration:
                ended = True
        assert ended, "the stream went on after access was revoked"
    finally:
        context.__exit__(None, None, None)


@pytest.mark.skipif(
    not os.environ.get("REDIS_URL"), reason="the Redis channel layer needs REDIS_URL"
)
async def test_a_subscription_waits_longer_than_the_layers_blocking_pop_without_an_error():
    """Seven quiet seconds on the Redis layer (its blocking pop waits 5 s; redis-py 8 reads
    with a 5 s socket timeout unless told otherwise): the wait ends in a keep-alive (None),
    not Redis's read timeout, and the next event still arrives."""
    from roject.members.live import project_event_publish, project_subscribed

    async with project_subscribed(project_id=987_654, keepalive=7.0) as events:
        assert await anext(events) is None
        await project_event_publish(project_id=987_654, kind="files", data={"x": 1})
        assert await anext(events) == {"kind": "files", "data": {"x": 1}}


@pytest.mark.skipif(
    not os.environ.get("REDIS_URL"), reason="the Redis channel layer needs REDIS_URL"
)
async def test_an_open_subscription_does_not_hold_up_the_processs_other_channels(monkeypatch):
    """While a page's project stream waits on the layer, a message for another channel of the
    process (a turn's Stop, approval or relay request) arrives at once, not after the
    subscription's blocking pop ends."""
    import asyncio

    from channels.layers import get_channel_layer
    from channels_redis.core import RedisChannelLayer

    from roject.members.live import project_subscribed

    # A blocking pop of a minute (5 s in use): a message held up behind it would come after
    # the subscription's own wait ends, not before.
    monkeypatch.setattr(RedisChannelLayer, "brpop_timeout", 60)
    layer = get_channel_layer()
    turn_channel = await layer.new_channel()
    async with project_subscribed(project_id=987_655, keepalive=120.0) as events:
        waiting = asyncio.create_task(anext(events))  # holds the layer's receive
        await asyncio.sleep(0.3)
        received = asyncio.create_task(layer.receive(turn_channel))
        await asyncio.sleep(0.3)
        await layer.send(turn_channel, {"type": "turn.stop"})
        done, _ = await asyncio.wait({waiting, received}, return_when=asyncio.FIRST_COMPLETED)
        assert done == {received} and received.result()["type"] == "turn.stop"
        waiting.cancel()
