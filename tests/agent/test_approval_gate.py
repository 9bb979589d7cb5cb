"""The approval gate's choices: a write that changes nothing does not ask, a tool allowed for
the rest of a conversation stops asking there (stored, so every process and later turn sees
it), and a waiting approval shows in the conversation list."""

from pathlib import Path

import pytest

from roject.storage import project_root_create
from rojos.models import Conversation, default_tools
from tests.approvals.test_approvals import chat_deciding, of_type
from tests.support.fake_provider import stream, text_chunks, tool_call_chunks
from tests.support.helpers import make_rojo
from tests.support.live_server import ApiClient, Event, parse_sse

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def rojo(fake_provider, settings):
    settings.ROJO_PROVIDER_RETRIES = 0
    settings.ROJO_APPROVAL_TIMEOUT = 20
    return make_rojo(fake_provider.base_url, tools=[*default_tools(), "delete_path"])


@pytest.fixture
def root(project) -> Path:
    return project_root_create(project.pk)


def approve(client: ApiClient, conversation: int, event: Event, **extra) -> None:
    response = client.post(
        f"/api/conversations/{conversation}/approve",
        json={"call": event.data["id"], "approve": True, **extra},
    )
    assert response.status_code == 200, response.text


def test_a_write_that_changes_nothing_runs_without_asking(
    client_for, users, project, rojo, fake_provider, root
):
    """Rewriting a file with its own text is not a question: no APPROVAL_REQUIRED, it runs."""
    (root / "same.txt").write_text("unchanged\n")
    fake_provider.add(
        stream(
            *tool_call_chunks([("write_text_content", {"path": "same.txt", "text": "unchanged\n"})])
        ),
        stream(*text_chunks("Done.")),
    )
    events = chat_deciding(client_for(users["editor"]), project, rojo)
    assert [e.type for e in events] == ["START", "TOOL_CALL", "TOOL_RESULT", "CHAT", "DONE"]
    assert of_type(events, "TOOL_RESULT")[0].data["ok"] is True
    assert (root / "same.txt").read_text() == "unchanged\n"


def test_allowed_for_the_conversation_a_tool_stops_asking_there_and_only_there(
    client_for, users, project, rojo, fake_provider, root
):
    """Approved with allow_for_conversation, the next writes of the same tool, in this turn
    and the next, run without asking; another Ask-before tool still asks; another
    conversation still asks."""
    for name in ("a.txt", "b.txt", "c.txt"):
        (root / name).write_text("old\n")
    fake_provider.add(
        stream(*tool_call_chunks([("write_text_content", {"path": "a.txt", "text": "new\n"})])),
        stream(*tool_call_chunks([("write_text_content", {"path": "b.txt", "text": "new\n"})])),
        stream(*tool_call_chunks([("delete_path", {"path": "c.txt"})])),
        stream(*text_chunks("Done.")),
    )
    client = client_for(users["editor"])
    asked: list[str] = []

    def decide(conversation: int, event: Event) -> None:
        asked.append(event.data["name"])
        approve(client, conversation, event, allow_for_conversation=len(asked) == 1)

    events = chat_deciding(client, project, rojo, decide)
    assert asked == ["write_text_content", "delete_path"]
    assert [r.data["ok"] for r in of_type(events, "TOOL_RESULT")] == [True, True, True]
    conversation = Conversation.objects.get(pk=events[0].data["conversation"])
    assert conversation.allowed_tools == ["write_text_content"]
    assert (root / "b.txt").read_text() == "new\n"

    # The next turn of the same conversation: still allowed.
    (root / "d.txt").write_text("old\n")
    fake_provider.add(
        stream(*tool_call_chunks([("write_text_content", {"path": "d.txt", "text": "new\n"})])),
        stream(*text_chunks("Done.")),
    )
    with client.chat_stream(
        project.pk, rojo=rojo.slug, message="Again", conversation=conversation.pk
    ) as response:
        again = list(parse_sse(response.iter_lines()))
    assert "APPROVAL_REQUIRED" not in [e.type for e in again]
    assert (root / "d.txt").read_text() == "new\n"
    detail = client.get(f"/api/conversations/{conversation.pk}").json()
    assert detail["allowed_tools"] == ["write_text_content"]

    # Another conversation asks again.
    (root / "e.txt").write_text("old\n")
    fake_provider.add(
        stream(*tool_call_chunks([("write_text_content", {"path": "e.txt", "text": "new\n"})])),
        stream(*text_chunks("Done.")),
    )
    elsewhere: list[str] = []
    chat_deciding(
        client,
        project,
        rojo,
        lambda c, e: (elsewhere.append(e.data["name"]), approve(client, c, e)),
    )
    assert elsewhere == ["write_text_content"]


def test_allowing_needs_an_approval_a_denial_allows_nothing(
    client_for, users, project, rojo, fake_provider, root
):
    """allow_for_conversation with a denial stores nothing."""
    (root / "a.txt").write_text("old\n")
    fake_provider.add(
        stream(*tool_call_chunks([("write_text_content", {"path": "a.txt", "text": "new\n"})])),
        stream(*text_chunks("Done.")),
    )
    client = client_for(users["editor"])

    def deny(conversation: int, event: Event) -> None:
        response = client.post(
            f"/api/conversations/{conversation}/approve",
            json={"call": event.data["id"], "approve": False, "allow_for_conversation": True},
        )
        assert response.status_code == 200

    events = chat_deciding(client, project, rojo, deny)
    assert Conversation.objects.get(pk=events[0].data["conversation"]).allowed_tools == []
    assert (root / "a.txt").read_text() == "old\n"


def test_the_conversation_list_shows_a_waiting_approval(
    client_for, users, project, rojo, fake_provider, root
):
    """While a call waits, the list (and the detail) say waiting_approval; once decided,
    no more."""
    (root / "a.txt").write_text("old\n")
    fake_provider.add(
        stream(*tool_call_chunks([("write_text_content", {"path": "a.txt", "text": "new\n"})])),
        stream(*text_chunks("Done.")),
    )
    client = client_for(users["editor"])
    viewer = client_for(users["viewer"])
    seen = []

    def decide(conversation: int, event: Event) -> None:
        listed = viewer.get(f"/api/projects/{project.pk}/conversations").json()
        seen.append([c["waiting_approval"] for c in listed if c["id"] == conversation])
        approve(client, conversation, event)

    events = chat_deciding(client, project, rojo, decide)
    assert seen == [[True]]
    listed = client.get(f"/api/projects/{project.pk}/conversations").json()
    conversation = events[0].data["conversation"]
    assert [c["waiting_approval"] for c in listed if c["id"] == conversation] == [False]


def test_a_writes_diff_is_kept_for_its_activity_line(
    client_for, users, project, rojo, fake_provider, root
):
    """A whole-file write keeps the diff of what it changed with its undo record; members
    read it (viewers too), anyone else gets the 404 of a missing change."""
    (root / "a.txt").write_text("keep\nold\n")
    fake_provider.add(
        stream(
            *tool_call_chunks(
                [
                    ("write_text_content", {"path": "a.txt", "text": "keep\nnew\n"}),
                    ("write_text_content", {"path": "fresh.txt", "text": "hello\n"}),
                ]
            )
        ),
        stream(*text_chunks("Done.")),
    )
    client = client_for(users["editor"])
    events = chat_deciding(client, project, rojo, lambda c, e: approve(client, c, e))
    first, second = [r.data["change"] for r in of_type(events, "TOOL_RESULT")]
    diff = client_for(users["viewer"]).get(f"/api/changes/{first}/diff").json()["diff"]
    assert diff == "--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n keep\n-old\n+new\n"
    created = client.get(f"/api/changes/{second}/diff").json()["diff"]
    assert created == "--- a/fresh.txt\n+++ b/fresh.txt\n@@ -0,0 +1 @@\n+hello\n"
    outsider = client_for(users["outsider"]).get(f"/api/changes/{first}/diff")
    missing = client.get("/api/changes/999999/diff")
    assert outsider.status_code == missing.status_code == 404
    assert outsider.json() == missing.json()


def test_a_decision_that_came_too_late_allows_nothing(
    client_for, users, project, fake_provider, root, held_write
):
    """A second "approve + allow for this conversation" on a call already decided (its tool
    runs) is refused, 409, and leaves the conversation's allowed tools as they were."""
    rojo = make_rojo(
        fake_provider.base_url,
        tools=[*default_tools(), held_write.name],
        approval_tools=[held_write.name],
    )
    (root / "a.txt").write_text("old\n")
    fake_provider.add(
        stream(*tool_call_chunks([(held_write.name, {"path": "a.txt", "text": "new\n"})])),
        stream(*text_chunks("Done.")),
    )
    client = client_for(users["editor"])
    late: list[int] = []

    def decide(conversation: int, event: Event) -> None:
        approve(client, conversation, event)
        assert held_write.started.wait(20)
        response = client.post(
            f"/api/conversations/{conversation}/approve",
            json={"call": event.data["id"], "approve": True, "allow_for_conversation": True},
        )
        late.append(response.status_code)
        held_write.release.set()

    events = chat_deciding(client, project, rojo, decide)
    assert late == [409]
    assert [r.data["ok"] for r in of_type(events, "TOOL_RESULT")] == [True]
    assert Conversation.objects.get(pk=events[0].data["conversation"]).allowed_tools == []
    assert (root / "a.txt").read_text() == "new\n"
