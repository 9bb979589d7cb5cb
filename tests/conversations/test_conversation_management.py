"""Renaming, deleting and listing conversations over the API: who may, and what is left.

Roles: editors and owners may rename and delete any conversation of their project; a viewer
may do neither (403); a non-member gets 404, as for a missing conversation.
"""

import threading

import pytest
from django.utils import timezone

from roject.storage import project_root_create
from rojos.models import Conversation, FileChange, Message, TurnRecord, default_tools
from tests.support.fake_provider import Gate, stream, text_chunks, tool_call_chunks
from tests.support.helpers import make_rojo, sqlite_plan, start_with_what_it_read
from tests.support.live_server import parse_sse, read_until, wait_until

pytestmark = pytest.mark.django_db(transaction=True)

EXPECTED = {"owner": 200, "editor": 200, "viewer": 403, "outsider": 404}


@pytest.fixture
def rojo(fake_provider, settings):
    settings.ROJO_PROVIDER_RETRIES = 0
    settings.ROJO_APPROVAL_TIMEOUT = 20
    return make_rojo(fake_provider.base_url, tools=default_tools())


def conversation_of(project, user, title="A conversation") -> Conversation:
    conversation = Conversation.objects.create(project=project, user=user, title=title)
    Message.objects.create(conversation=conversation, position=0, role="user", content=title)
    return conversation


@pytest.mark.parametrize("role", [*EXPECTED, "anonymous"])
def test_rename_is_for_editors_and_owners(client_for, users, project, role):
    """Owner and editor rename anyone's conversation; a viewer gets 403, an outsider 404,
    the anonymous 401; the title is kept on one line."""
    conversation = conversation_of(project, users["viewer"])
    client = client_for(users.get(role))
    response = client.http.patch(
        f"/api/conversations/{conversation.pk}", json={"title": "  Plan\nfor   the docs "}
    )
    assert response.status_code == EXPECTED.get(role, 401)
    conversation.refresh_from_db()
    renamed = response.status_code == 200
    assert conversation.title == ("Plan for the docs" if renamed else "A conversation")
    if renamed:
        assert response.json()["title"] == "Plan for the docs"


@pytest.mark.parametrize("role", [*EXPECTED, "anonymous"])
def test_delete_is_for_editors_and_owners(client_for, users, project, role):
    conversation = conversation_of(project, users["editor"])
    response = client_for(users.get(role)).http.delete(f"/api/conversations/{conversation.pk}")
    assert response.status_code == EXPECTED.get(role, 401)
    deleted = response.status_code == 200
    assert Conversation.objects.filter(pk=conversation.pk).exists() is not deleted
    assert Message.objects.filter(conversation_id=conversation.pk).exists() is not deleted


def test_deleting_a_running_conversation_stops_its_turn_and_keeps_its_files_and_changes(
    client_for, users, project, rojo, fake_provider
):
    """The turn is stopped first; the file its call wrote stays, and the change record
    stays, without the conversation, still undoable. The reply after the write holds until
    the delete was answered, so the turn surely still runs when it comes."""
    root = project_root_create(project.pk)
    deleted_answered = threading.Event()
    fake_provider.add(
        stream(*tool_call_chunks([("write_text_content", {"path": "a.txt", "text": "hi\n"})])),
        stream(Gate(deleted_answered), *text_chunks("w " * 200, pieces=200), delay=0.05),
    )
    client = client_for(users["editor"])
    with client.chat_stream(project.pk, rojo=rojo.pk, message="Write a.txt") as response:
        events = parse_sse(response.iter_lines())
        conversation = next(events).data["conversation"]
        wait_until(lambda: FileChange.objects.filter(after__isnull=False).exists())
        deleted = client_for(users["owner"]).http.delete(f"/api/conversations/{conversation}")
        deleted_answered.set()
        assert deleted.status_code == 200
        assert [e.type for e in events][-2:] == ["ERROR", "DONE"]
    assert not Conversation.objects.filter(pk=conversation).exists()
    assert (root / "a.txt").read_text() == "hi\n"
    change = FileChange.objects.get()
    assert change.conversation_id is None and change.message_id is None
    undone = client.post(f"/api/changes/{change.pk}/undo")
    assert undone.status_code == 200, undone.text
    assert not (root / "a.txt").exists()


def test_a_delete_never_goes_on_under_a_reply_that_claimed_the_conversation(
    client_for, users, project, rojo, fake_provider
):
    """The delete's own step, as a delete that read the conversation before a message
    claimed it reaches it: it claims the conversation in its transaction, so it deletes
    nothing while the reply holds it (before, it deleted under the reply, which then failed
    to store, an internal error, or was lost). The reply ends whole; a delete then goes."""
    from roject.audit.log import AuditActor
    from rojos.conversations.services import _delete

    answered = threading.Event()
    fake_provider.add(stream(*text_chunks("One.")), stream(text_chunks("Two, ", finish=None),
                      Gate(answered), text_chunks("three."), delay=0.05))  # fmt: skip
    client = client_for(users["editor"])
    conversation = client.chat(project.pk, rojo=rojo.pk, message="First")[0].data["conversation"]
    read_before = Conversation.objects.get(pk=conversation)

    with client.chat_stream(
        project.pk, rojo=rojo.pk, message="Second", conversation=conversation
    ) as response:
        events = parse_sse(response.iter_lines())
        read_until(events, "CHAT")  # the reply runs, held after its first words
        deleted_under_it = _delete(read_before, AuditActor())
        answered.set()
        rest = list(events)

    assert deleted_under_it is False
    assert [e.type for e in rest][-1] == "DONE" and "ERROR" not in {e.type for e in rest}
    assert [m.content for m in Message.objects.filter(conversation_id=conversation)][-1] == (
        "Two, three."
    )
    deleted = client_for(users["owner"]).http.delete(f"/api/conversations/{conversation}")
    assert deleted.status_code == 200
    assert not Conversation.objects.filter(pk=conversation).exists()


def test_a_message_to_a_conversation_deleted_as_it_starts_is_a_404_not_a_500(
    client_for, users, project, rojo
):
    """Read by the chat, deleted before its claim: the start finds it gone."""
    from django.http import Http404

    conversation = conversation_of(project, users["editor"])
    read_by_the_chat = Conversation.objects.get(pk=conversation.pk)
    assert (
        client_for(users["owner"]).http.delete(f"/api/conversations/{conversation.pk}").status_code
        == 200
    )

    with pytest.raises(Http404):
        start_with_what_it_read(
            read_by_the_chat, project=project, user=users["editor"], rojo=rojo,
            message="Still there?",
        )  # fmt: skip
    assert not Message.objects.filter(conversation_id=conversation.pk).exists()


def test_the_list_pages_newest_first_with_author_and_no_row_twice(client_for, users, project):
    """120 conversations come in pages of 50, 50 and 20, each row once, newest first; rows
    updated at the same moment are told apart by id."""
    now = timezone.now()
    rows = [
        Conversation(project=project, user=users["owner"], title=f"c{i}", updated=now)
        for i in range(120)
    ]
    Conversation.objects.bulk_create(rows)
    Conversation.objects.filter(title="c7").update(updated=now + timezone.timedelta(minutes=1))
    client = client_for(users["viewer"])
    seen, before = [], ""
    for size in (50, 50, 20):
        page = client.get(f"/api/projects/{project.pk}/conversations", params={"before": before})
        assert page.status_code == 200
        items = page.json()
        assert len(items) == size
        seen += items
        before = items[-1]["cursor"]
    assert (
        client.get(f"/api/projects/{project.pk}/conversations", params={"before": before}).json()
        == []
    )
    assert len({item["id"] for item in seen}) == 120
    assert seen[0]["title"] == "c7"
    assert {item["author"] for item in seen} == {"owner"}
    assert (
        client_for(users["outsider"]).get(f"/api/projects/{project.pk}/conversations").status_code
        == 404
    )


def test_badges_say_running_waiting_and_failed(client_for, users, project, rojo, fake_provider):
    """A turn waiting for approval is `waiting`, then `running` once decided; a turn that
    ended in an error is `failed`; a clean one has no badge."""
    root = project_root_create(project.pk)
    (root / "notes.txt").write_text("old\n")
    done = conversation_of(project, users["owner"], "Done")
    TurnRecord.objects.create(
        conversation=done, user_message=done.messages.get(), status=TurnRecord.Status.DONE
    )
    failed = conversation_of(project, users["owner"], "Failed")
    TurnRecord.objects.create(
        conversation=failed, user_message=failed.messages.get(), status=TurnRecord.Status.ERROR
    )
    listed = threading.Event()  # the reply after the approval holds until the list was read
    fake_provider.add(
        stream(*tool_call_chunks([("write_text_content", {"path": "notes.txt", "text": "new\n"})])),
        stream(Gate(listed), *text_chunks("w " * 100, pieces=100), delay=0.05),
    )
    client = client_for(users["editor"])

    def statuses(*ids) -> dict:
        response = client.get(
            f"/api/projects/{project.pk}/conversations/status",
            params={"ids": ",".join(map(str, ids))},
        )
        assert response.status_code == 200
        return response.json()["statuses"]

    with client.chat_stream(project.pk, rojo=rojo.pk, message="Rewrite notes") as response:
        events = parse_sse(response.iter_lines())
        running = next(events).data["conversation"]
        approval = next(e for e in events if e.type == "APPROVAL_REQUIRED")
        wait_until(lambda: statuses(done.pk).get(str(running)) == "waiting")
        assert statuses(done.pk, failed.pk) == {
            str(done.pk): "",
            str(failed.pk): "failed",
            str(running): "waiting",
        }
        client.post(
            f"/api/conversations/{running}/approve",
            json={"call": approval.data["id"], "approve": True},
        )
        wait_until(lambda: statuses().get(str(running)) == "running")
        items = client.get(f"/api/projects/{project.pk}/conversations").json()
        assert {i["title"]: i["status"] for i in items}["Rewrite notes"] == "running"
        listed.set()
        list(events)
    assert statuses(running) == {str(running): ""}


def test_a_turn_waiting_for_approval_still_counts_as_running_for_the_limit(
    client_for, users, project, rojo, fake_provider, settings
):
    """Its record says `waiting`, and the user's concurrent-turn limit still counts it."""
    settings.ROJO_USER_CONCURRENT_TURNS = 1
    root = project_root_create(project.pk)
    (root / "notes.txt").write_text("old\n")
    fake_provider.add(
        stream(*tool_call_chunks([("write_text_content", {"path": "notes.txt", "text": "new\n"})])),
        stream(*text_chunks("Done.")),
    )
    client = client_for(users["editor"])
    with client.chat_stream(project.pk, rojo=rojo.pk, message="Rewrite notes") as response:
        events = parse_sse(response.iter_lines())
        conversation = next(events).data["conversation"]
        approval = next(e for e in events if e.type == "APPROVAL_REQUIRED")
        wait_until(lambda: Conversation.objects.filter(approval_waiting__isnull=False).exists())
        second = client.post(
            f"/api/projects/{project.pk}/chat", json={"rojo": rojo.pk, "message": "More"}
        )
        assert second.status_code == 429
        client.post(
            f"/api/conversations/{conversation}/approve",
            json={"call": approval.data["id"], "approve": False},
        )
        list(events)
    assert TurnRecord.objects.get().status == "done"


def test_pinned_conversations_head_every_members_list_across_pages(client_for, users, project):
    """An editor pins the oldest of 70: it comes first for the viewer too, the pages after
    still hold every other row once; a viewer may not pin (403)."""
    now = timezone.now()
    Conversation.objects.bulk_create(
        Conversation(project=project, user=users["owner"], title=f"c{i}", updated=now)
        for i in range(70)
    )
    oldest = Conversation.objects.order_by("pk").first()
    Conversation.objects.filter(pk=oldest.pk).update(updated=now - timezone.timedelta(days=9))
    url = f"/api/conversations/{oldest.pk}"
    assert client_for(users["viewer"]).http.patch(url, json={"pinned": True}).status_code == 403
    pinned = client_for(users["editor"]).http.patch(url, json={"pinned": True})
    assert pinned.status_code == 200 and pinned.json()["pinned"] is True
    assert pinned.json()["title"] == oldest.title  # a pin renames nothing

    viewer = client_for(users["viewer"])
    first = viewer.get(f"/api/projects/{project.pk}/conversations").json()
    rest = viewer.get(
        f"/api/projects/{project.pk}/conversations", params={"before": first[-1]["cursor"]}
    ).json()
    assert first[0]["id"] == oldest.pk and first[0]["pinned"] is True
    assert len(first) == 50 and len(rest) == 20
    assert len({item["id"] for item in first + rest}) == 70


def test_non_ascii_digits_in_ids_and_last_event_id_are_ignored_not_a_500(
    client_for, users, project
):
    """`²` passes str.isdigit but is no number: in `?ids=` it is left out, and as a
    `Last-Event-ID` it is ignored (the stream starts from the beginning); never a 500."""
    conversation = Conversation.objects.create(project=project, user=users["editor"], title="T")
    client = client_for(users["editor"])
    status = client.get(
        f"/api/projects/{project.pk}/conversations/status", params={"ids": f"²,{conversation.pk}"}
    )
    assert status.status_code == 200, status.text
    stream_ = client.get(
        f"/api/conversations/{conversation.pk}/stream",
        headers={"Last-Event-ID": "²".encode("latin-1")},  # as the server decodes it
    )
    assert stream_.status_code < 500, stream_.text


def test_the_badges_poll_reads_the_conversations_asked_and_the_running_ones_alone(users, project):
    """The status poll (every open list, every few seconds) reads the conversations it names,
    by their keys, and the running ones, through the claimed ones' index
    (rojos/migrations/0032): not every conversation of the project, which an OR of the two
    read (4.2 ms a poll with 20,000 conversations, against 0.05 ms now)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from rojos.conversations.listing import conversation_statuses

    if connection.vendor != "sqlite":
        pytest.skip("SQLite's plans: PostgreSQL plans a small table by its statistics")
    asked = conversation_of(project, users["editor"], "Asked")
    conversation_of(project, users["editor"], "Idle")
    running = conversation_of(project, users["owner"], "Running")
    Conversation.objects.filter(pk=running.pk).update(
        turn_id="00000000-0000-4000-8000-000000000001", turn_heartbeat=timezone.now()
    )

    with CaptureQueriesContext(connection) as queries:
        statuses = conversation_statuses(project=project, ids=[asked.pk])

    assert statuses == {asked.pk: "", running.pk: "running"}
    assert len(queries) == 1
    sqlite_plan(
        queries[0]["sql"], table="rojos_conversation", ways=("rowid=?", "conversation_claimed")
    )
