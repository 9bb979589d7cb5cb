"""A viewer reads every conversation of the project but steers only their own: a message,
a branch switch or a Stop in someone else's conversation gets 403 and changes nothing."""

import pytest

from rojos.models import Conversation, Message
from tests.support.fake_provider import stream, text_chunks
from tests.support.helpers import make_rojo

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def rojo(fake_provider):
    return make_rojo(fake_provider.base_url)


def _conversation(client, project, rojo, message: str) -> int:
    events = client.chat(project.pk, rojo=rojo.slug, message=message)
    assert events[-1].type == "DONE"
    return events[0].data["conversation"]


def test_a_viewer_cannot_continue_an_editors_conversation(
    client_for, users, project, rojo, fake_provider
):
    fake_provider.add(stream(*text_chunks("Editor's answer.")))
    conversation = _conversation(client_for(users["editor"]), project, rojo, "Editor asks")
    before = list(Message.objects.filter(conversation_id=conversation).values_list("pk", flat=True))
    viewer = client_for(users["viewer"])

    posted = viewer.post(
        f"/api/projects/{project.pk}/chat",
        json={"rojo": rojo.slug, "message": "Viewer barges in", "conversation": conversation},
    )
    assert posted.status_code == 403
    assert "started this conversation" in posted.json()["detail"]
    first = Message.objects.filter(conversation_id=conversation).order_by("position").first()
    switched = viewer.post(f"/api/conversations/{conversation}/branch", json={"message": first.pk})
    assert switched.status_code == 403
    stopped = viewer.post(f"/api/conversations/{conversation}/stop")
    assert stopped.status_code == 403
    after = list(Message.objects.filter(conversation_id=conversation).values_list("pk", flat=True))
    assert after == before
    assert len(fake_provider.requests) == 1  # the viewer's message never reached the model
    assert viewer.get(f"/api/conversations/{conversation}").status_code == 200  # still readable


def test_a_viewer_continues_their_own_and_an_editor_anyones(
    client_for, users, project, rojo, fake_provider
):
    for text in ("One.", "Two.", "Three."):
        fake_provider.add(stream(*text_chunks(text)))
    viewer = client_for(users["viewer"])
    conversation = _conversation(viewer, project, rojo, "Viewer asks")
    events = viewer.chat(project.pk, rojo=rojo.slug, message="Again", conversation=conversation)
    assert events[-1].type == "DONE"
    events = client_for(users["editor"]).chat(
        project.pk, rojo=rojo.slug, message="Editor helps", conversation=conversation
    )
    assert events[-1].type == "DONE"
    assert Conversation.objects.get(pk=conversation).user == users["viewer"]
    assert Message.objects.filter(conversation_id=conversation, role="user").count() == 3
