"""Approval of calls that change existing files: the stream asks, a member who may write decides.

The turn runs on the live ASGI server; decisions arrive as separate requests, over the channel
layer. With REDIS_URL set, a second server process receives some of them.
"""

import io
import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from django.core.management import call_command

from roject.models import AuditAction, AuditEntry
from roject.storage import project_root_create
from rojos.models import Conversation, FileChange, Message, TurnRecord, default_tools
from rojos.provider.request import wire_call_id
from tests.support.fake_provider import stream, text_chunks, tool_call_chunks
from tests.support.helpers import assert_history_valid, make_rojo, stored_history
from tests.support.live_server import ApiClient, Event, parse_sse

pytestmark = pytest.mark.django_db(transaction=True)

DENIED = {"error": "denied by the user"}
REPLY = "All done."


@pytest.fixture
def rojo(fake_provider, settings):
    settings.ROJO_PROVIDER_RETRIES = 0
    return make_rojo(fake_provider.base_url, tools=[*default_tools(), "delete_path"])


@pytest.fixture(autouse=True)
def approval_timeout(settings):
    """Ample for every decision here; a decision that never arrives fails in seconds, not 5 min."""
    settings.ROJO_APPROVAL_TIMEOUT = 20


@pytest.fixture
def root(project) -> Path:
    return project_root_create(project.pk)


def script(fake_provider, *calls: tuple[str, dict]) -> None:
    """One model response with `calls`, then a plain reply once their results are back."""
    fake_provider.add(stream(*tool_call_chunks(list(calls))), stream(*text_chunks(REPLY)))


Decide = Callable[[int, Event], None]


def chat_deciding(client: ApiClient, project, rojo, decide: Decide | None = None) -> list[Event]:
    """Run a turn over the stream, calling `decide(conversation, event)` at each approval."""
    events: list[Event] = []
    with client.chat_stream(project.pk, rojo=rojo.slug, message="Go") as response:
        assert response.status_code == 200
        for event in parse_sse(response.iter_lines()):
            events.append(event)
            if event.type == "APPROVAL_REQUIRED" and decide is not None:
                decide(events[0].data["conversation"], event)
    return events


def deciding(client: ApiClient, *answers: bool, check: Callable[[], None] | None = None) -> Decide:
    """A decider that answers successive approvals with `answers`, after running `check`."""
    queue = list(answers)

    def decide(conversation: int, event: Event) -> None:
        if check is not None:
            check()
        response = client.post(
            f"/api/conversations/{conversation}/approve",
            json={"call": event.data["id"], "approve": queue.pop(0)},
        )
        assert response.status_code == 200, response.text
        assert response.json() == {"delivered": True}

    return decide


def of_type(events: list[Event], kind: str) -> list[Event]:
    return [event for event in events if event.type == kind]


# approve, deny, time out


def test_overwrite_waits_for_approval_shows_a_diff_and_runs_once_approved(
    client_for, users, project, rojo, fake_provider, root
):
    (root / "notes.txt").write_text("keep\nold line\n")
    args = {"path": "notes.txt", "text": "keep\nnew line\n"}
    script(fake_provider, ("write_text_content", args))

    def still_old():
        assert (root / "notes.txt").read_text() == "keep\nold line\n"

    client = client_for(users["editor"])
    events = chat_deciding(client, project, rojo, deciding(client, True, check=still_old))

    assert [e.type for e in events] == [
        "START",
        "TOOL_CALL",
        "APPROVAL_REQUIRED",
        "TOOL_RESULT",
        "CHAT",
        "DONE",
    ]
    call, approval, result = events[1:4]
    assert approval.data == {
        "id": call.data["id"],
        "name": "write_text_content",
        "args": args,
        "preview": {
            "diff": (
                "--- a/notes.txt\n+++ b/notes.txt\n@@ -1,2 +1,2 @@\n keep\n-old line\n+new line\n"
            )
        },
    }
    change = FileChange.objects.get(tool_call_id=call.data["id"])
    assert result.data == {
        "id": call.data["id"],
        "name": "write_text_content",
        "result": {"ok": True},
        "ok": True,
        "change": change.pk,
    }
    assert (root / "notes.txt").read_text() == "keep\nnew line\n"


def decided_by() -> list[int | None]:
    """Who made each audited approval decision: a user's id, or None for the system's denial
    of a call whose wait timed out."""
    actions = [AuditAction.APPROVAL_GRANTED, AuditAction.APPROVAL_DENIED]
    return [e.actor_user_id for e in AuditEntry.objects.filter(action__in=actions)]


def test_denied_call_leaves_the_file_and_the_model_reads_the_denial(
    client_for, users, project, rojo, fake_provider, root
):
    (root / "notes.txt").write_text("mine\n")
    script(fake_provider, ("write_text_content", {"path": "notes.txt", "text": "theirs\n"}))

    client = client_for(users["editor"])
    events = chat_deciding(client, project, rojo, deciding(client, False))

    assert decided_by() == [users["editor"].pk], "the denial did not reach the turn"
    call, result = of_type(events, "TOOL_CALL")[0], of_type(events, "TOOL_RESULT")[0]
    assert result.data == {
        "id": call.data["id"],
        "name": "write_text_content",
        "result": DENIED,
        "ok": False,
    }
    assert events[-1].type == "DONE" and not of_type(events, "ERROR")
    assert (root / "notes.txt").read_text() == "mine\n"
    assert FileChange.objects.count() == 0
    assert fake_provider.requests[1]["messages"][-1] == {
        "role": "tool",
        "tool_call_id": wire_call_id(call.data["id"]),
        "content": json.dumps(DENIED),
    }
    tool_message = stored_history(events[0].data["conversation"])[2]
    assert (tool_message.role, tool_message.is_error) == ("tool", True)


def test_no_decision_within_the_timeout_counts_as_a_denial(
    client_for, users, project, rojo, fake_provider, root, settings
):
    settings.ROJO_APPROVAL_TIMEOUT = 0.3
    (root / "notes.txt").write_text("mine\n")
    script(fake_provider, ("write_text_content", {"path": "notes.txt", "text": "theirs\n"}))

    events = chat_deciding(client_for(users["editor"]), project, rojo)

    assert decided_by() == [None]  # the system's denial, once the wait timed out
    assert [e.type for e in events] == [
        "START",
        "TOOL_CALL",
        "APPROVAL_REQUIRED",
        "TOOL_RESULT",
        "CHAT",
        "DONE",
    ]
    assert of_type(events, "TOOL_RESULT")[0].data["result"] == DENIED
    assert (root / "notes.txt").read_text() == "mine\n"
    assert json.loads(fake_provider.requests[1]["messages"][-1]["content"]) == DENIED


def two_overwrites(fake_provider, root: Path) -> None:
    """a.txt and b.txt exist; one response replaces both, each call asking for approval."""
    (root / "a.txt").write_text("a\n")
    (root / "b.txt").write_text("b\n")
    script(
        fake_provider,
        ("write_text_content", {"path": "a.txt", "text": "A\n"}),
        ("write_text_content", {"path": "b.txt", "text": "B\n"}),
    )


def test_each_call_of_a_response_is_decided_on_its_own(
    client_for, users, project, rojo, fake_provider, root
):
    two_overwrites(fake_provider, root)

    client = client_for(users["editor"])
    events = chat_deciding(client, project, rojo, deciding(client, True, False))

    approvals = of_type(events, "APPROVAL_REQUIRED")
    assert [a.data["args"]["path"] for a in approvals] == ["a.txt", "b.txt"]
    assert [r.data["ok"] for r in of_type(events, "TOOL_RESULT")] == [True, False]
    assert (root / "a.txt").read_text() == "A\n"
    assert (root / "b.txt").read_text() == "b\n"


def test_a_decision_for_another_call_leaves_the_waiting_call_alone(
    client_for, users, project, rojo, fake_provider, root
):
    (root / "notes.txt").write_text("mine\n")
    script(fake_provider, ("write_text_content", {"path": "notes.txt", "text": "theirs\n"}))
    client = client_for(users["editor"])

    def decide(conversation: int, event: Event) -> None:
        url = f"/api/conversations/{conversation}/approve"
        response = client.post(url, json={"call": "call_somewhere_else", "approve": True})
        assert response.status_code == 409
        assert "not waiting for a decision" in response.json()["detail"]
        time.sleep(0.2)
        assert (root / "notes.txt").read_text() == "mine\n"
        assert Conversation.objects.get(pk=conversation).turn_id is not None
        client.post(url, json={"call": event.data["id"], "approve": False})

    events = chat_deciding(client, project, rojo, decide)

    assert of_type(events, "TOOL_RESULT")[0].data["result"] == DENIED
    assert (root / "notes.txt").read_text() == "mine\n"


def test_a_call_already_decided_cannot_be_decided_again(
    client_for, users, project, rojo, fake_provider, root
):
    two_overwrites(fake_provider, root)
    client = client_for(users["editor"])
    decided: list[str] = []

    def decide(conversation: int, event: Event) -> None:
        url = f"/api/conversations/{conversation}/approve"
        for earlier in decided:  # the first call's result is stored: it is no longer open
            again = client.post(url, json={"call": earlier, "approve": False})
            assert again.status_code == 409, again.content
        response = client.post(url, json={"call": event.data["id"], "approve": True})
        assert response.status_code == 200
        decided.append(event.data["id"])

    events = chat_deciding(client, project, rojo, decide)

    assert len(decided) == 2
    assert [r.data["ok"] for r in of_type(events, "TOOL_RESULT")] == [True, True]
    assert (root / "a.txt").read_text() == "A\n" and (root / "b.txt").read_text() == "B\n"


# which calls ask


def test_writing_a_new_file_needs_no_approval(
    client_for, users, project, rojo, fake_provider, root
):
    script(fake_provider, ("write_text_content", {"path": "docs/new.txt", "text": "hello\n"}))

    events = chat_deciding(client_for(users["editor"]), project, rojo)

    assert [e.type for e in events] == ["START", "TOOL_CALL", "TOOL_RESULT", "CHAT", "DONE"]
    assert (root / "docs" / "new.txt").read_text() == "hello\n"


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("write_text_content", {"path": "notes.txt", "text": "theirs\n"}),
        ("move_path", {"source": "notes.txt", "destination": "moved.txt"}),
        ("delete_path", {"path": "notes.txt"}),
    ],
)
def test_a_rojo_without_approval_tools_never_asks(
    client_for, users, project, fake_provider, root, settings, name, args
):
    settings.ROJO_PROVIDER_RETRIES = 0
    rojo = make_rojo(
        fake_provider.base_url, tools=[*default_tools(), "delete_path"], approval_tools=[]
    )
    (root / "notes.txt").write_text("mine\n")
    script(fake_provider, (name, args))

    events = chat_deciding(client_for(users["editor"]), project, rojo)

    assert [e.type for e in events] == ["START", "TOOL_CALL", "TOOL_RESULT", "CHAT", "DONE"]
    assert of_type(events, "TOOL_RESULT")[0].data["ok"] is True
    assert (root / "notes.txt").exists() == (name == "write_text_content")


def test_delete_preview_lists_everything_that_would_be_deleted(
    client_for, users, project, rojo, fake_provider, root
):
    (root / "old" / "sub").mkdir(parents=True)
    (root / "old" / "a.txt").write_text("a")
    (root / "old" / "sub" / "b.txt").write_text("b")
    script(fake_provider, ("delete_path", {"path": "old", "recursive": True}))

    def still_there():
        assert (root / "old" / "sub" / "b.txt").exists()

    client = client_for(users["editor"])
    events = chat_deciding(client, project, rojo, deciding(client, True, check=still_there))

    listing = ["old/a.txt", "old/sub", "old/sub/b.txt", "old"]
    assert of_type(events, "APPROVAL_REQUIRED")[0].data["preview"] == {"delete": listing}
    assert of_type(events, "TOOL_RESULT")[0].data["result"] == {"ok": True, "deleted": listing}
    assert not (root / "old").exists()


@pytest.mark.parametrize("replaces", [False, True])
def test_move_preview_names_both_paths_and_whether_it_replaces_a_file(
    client_for, users, project, rojo, fake_provider, root, replaces
):
    (root / "draft.txt").write_text("draft\n")
    if replaces:
        (root / "final.txt").write_text("older final\n")
    args = {"source": "draft.txt", "destination": "final.txt", "overwrite": True}
    script(fake_provider, ("move_path", args))

    client = client_for(users["editor"])
    events = chat_deciding(client, project, rojo, deciding(client, True))

    assert of_type(events, "APPROVAL_REQUIRED")[0].data["preview"] == {
        "move": ["draft.txt", "final.txt"],
        "replaces": replaces,
    }
    assert of_type(events, "TOOL_RESULT")[0].data["ok"] is True
    assert not (root / "draft.txt").exists()
    assert (root / "final.txt").read_text() == "draft\n"


@pytest.mark.parametrize("listed", [False, True])
def test_edit_asks_only_when_the_rojo_lists_it(
    client_for, users, project, fake_provider, root, settings, listed
):
    settings.ROJO_PROVIDER_RETRIES = 0
    fields = {"approval_tools": ["write_text_content", "edit_text_content"]} if listed else {}
    rojo = make_rojo(fake_provider.base_url, **fields)
    assert ("edit_text_content" in rojo.approval_tools) is listed
    (root / "page.md").write_text("# Title\nbody\n")
    edits = [{"old_text": "body", "new_text": "new body"}]
    script(fake_provider, ("edit_text_content", {"path": "page.md", "edits": edits}))

    client = client_for(users["editor"])
    events = chat_deciding(client, project, rojo, deciding(client, True))

    approvals = of_type(events, "APPROVAL_REQUIRED")
    if listed:
        assert [a.data["preview"] for a in approvals] == [
            {"diff": "--- a/page.md\n+++ b/page.md\n@@ -1,2 +1,2 @@\n # Title\n-body\n+new body\n"}
        ]
    else:
        assert approvals == []
    assert (root / "page.md").read_text() == "# Title\nnew body\n"


# who may decide, and when


def test_only_members_who_may_write_can_decide(
    client_for, users, project, rojo, fake_provider, root
):
    (root / "notes.txt").write_text("mine\n")
    script(fake_provider, ("write_text_content", {"path": "notes.txt", "text": "theirs\n"}))
    editor = client_for(users["editor"])
    answers = {}

    def decide(conversation: int, event: Event) -> None:
        body = {"call": event.data["id"], "approve": True}
        url = f"/api/conversations/{conversation}/approve"
        for who in ("viewer", "outsider", None):
            answers[who] = client_for(users.get(who)).post(url, json=body)
        assert (root / "notes.txt").read_text() == "mine\n"
        editor.post(url, json={**body, "approve": False})

    events = chat_deciding(editor, project, rojo, decide)

    assert answers["viewer"].status_code == 403
    assert answers["viewer"].json() == {"detail": "Your role in this project is read-only."}
    assert answers["outsider"].status_code == 404
    assert answers[None].status_code == 401
    assert of_type(events, "TOOL_RESULT")[0].data["result"] == DENIED
    assert (root / "notes.txt").read_text() == "mine\n"


def test_approving_when_no_turn_runs_is_409(client_for, users, project, rojo):
    conversation = Conversation.objects.create(project=project, rojo=rojo)

    response = client_for(users["editor"]).post(
        f"/api/conversations/{conversation.pk}/approve", json={"call": "call_x", "approve": True}
    )

    assert response.status_code == 409
    assert response.json() == {"detail": "No reply is running in this conversation."}


def test_stop_while_waiting_ends_the_turn_with_the_call_answered(
    client_for, users, project, rojo, fake_provider, root
):
    (root / "notes.txt").write_text("mine\n")
    fake_provider.add(
        stream(*tool_call_chunks([("write_text_content", {"path": "notes.txt", "text": "x"})]))
    )
    client = client_for(users["editor"])

    def stop(conversation: int, event: Event) -> None:
        response = client.post(f"/api/conversations/{conversation}/stop")
        assert response.json() == {"stopping": True}

    events = chat_deciding(client, project, rojo, stop)

    types = [e.type for e in events]
    assert types[:3] == ["START", "TOOL_CALL", "APPROVAL_REQUIRED"]
    assert types[-2:] == ["ERROR", "DONE"] and events[-2].data["code"] == "stopped"
    assert not [e for e in of_type(events, "TOOL_RESULT") if e.data["ok"]]
    conversation = events[0].data["conversation"]
    history = stored_history(conversation)
    assert_history_valid(history)
    assert [m.role for m in history] == ["user", "assistant", "tool"]
    assert json.loads(history[-1].content) == {"error": "interrupted"}
    assert (root / "notes.txt").read_text() == "mine\n"
    assert TurnRecord.objects.get(conversation_id=conversation).status == "stopped"
    assert Conversation.objects.get(pk=conversation).turn_id is None
    assert FileChange.objects.count() == 0


def test_reattaching_while_waiting_shows_the_approval_then_the_rest(
    client_for, users, project, rojo, fake_provider, root
):
    (root / "notes.txt").write_text("mine\n")
    script(fake_provider, ("write_text_content", {"path": "notes.txt", "text": "theirs\n"}))
    client = client_for(users["editor"])
    with client.chat_stream(project.pk, rojo=rojo.slug, message="Go") as response:
        events = parse_sse(response.iter_lines())
        seen = [next(events), next(events)]
    conversation = seen[0].data["conversation"]
    assert seen[1].type == "TOOL_CALL"

    with client.http.stream(
        "GET",
        f"/api/conversations/{conversation}/stream",
        headers={"Last-Event-ID": str(seen[-1].id)},
    ) as response:
        rest = parse_sse(response.iter_lines())
        approval = next(rest)
        assert approval.type == "APPROVAL_REQUIRED"
        assert approval.data["id"] == seen[1].data["id"]
        client.post(
            f"/api/conversations/{conversation}/approve",
            json={"call": approval.data["id"], "approve": True},
        )
        remaining = list(rest)

    assert [e.id for e in [*seen, approval, *remaining]] == list(range(1, 7))
    assert [e.type for e in remaining] == ["TOOL_RESULT", "CHAT", "DONE"]
    assert (root / "notes.txt").read_text() == "theirs\n"


# the chat command


def chat_command(*options: str) -> list[dict]:
    out = io.StringIO()
    call_command(
        "chat",
        "Go",
        "--project=demo-project",
        "--rojo=test-rojo",
        "--user=editor",
        "--format=ndjson",
        *options,
        stdout=out,
        stderr=io.StringIO(),
    )
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_chat_command_denies_at_once_without_yes(fake_provider, rojo, root, settings):
    settings.ROJO_APPROVAL_TIMEOUT = 30
    (root / "notes.txt").write_text("mine\n")
    script(fake_provider, ("write_text_content", {"path": "notes.txt", "text": "theirs\n"}))

    events = chat_command()

    assert decided_by() == []  # denied as asked, not after the wait for a person timed out
    result = next(e for e in events if e["type"] == "TOOL_RESULT")
    assert (result["result"], result["ok"]) == (DENIED, False)
    assert (root / "notes.txt").read_text() == "mine\n"


def test_chat_command_with_yes_runs_the_call(fake_provider, rojo, root):
    (root / "notes.txt").write_text("mine\n")
    script(fake_provider, ("write_text_content", {"path": "notes.txt", "text": "theirs\n"}))

    events = chat_command("--yes")

    assert [e["type"] for e in events] == [
        "START",
        "TOOL_CALL",
        "APPROVAL_REQUIRED",
        "TOOL_RESULT",
        "CHAT",
        "DONE",
    ]
    assert events[3]["ok"] is True
    assert events[3]["change"] == FileChange.objects.get().pk
    assert (root / "notes.txt").read_text() == "theirs\n"


# decision and stream in different server processes (second_server: tests/support/server_process.py)


def test_approval_sent_to_another_process_reaches_the_turn(
    second_server, client_for, users, project, rojo, fake_provider, root
):
    (root / "notes.txt").write_text("mine\n")
    script(fake_provider, ("write_text_content", {"path": "notes.txt", "text": "theirs\n"}))
    elsewhere = client_for(users["owner"], base_url=second_server)

    events = chat_deciding(client_for(users["editor"]), project, rojo, deciding(elsewhere, True))

    assert [e.type for e in events] == [
        "START",
        "TOOL_CALL",
        "APPROVAL_REQUIRED",
        "TOOL_RESULT",
        "CHAT",
        "DONE",
    ]
    assert of_type(events, "TOOL_RESULT")[0].data["ok"] is True
    assert (root / "notes.txt").read_text() == "theirs\n"
    assert Message.objects.filter(role="assistant", content=REPLY).exists()


def test_an_allow_sent_to_another_process_is_stored_by_the_turn(
    second_server, client_for, users, project, rojo, fake_provider, root
):
    """An "approve + allow for this conversation" sent through another process: the turn that
    received it stores the allow before the call goes on, so its next write does not ask."""
    for name in ("a.txt", "b.txt"):
        (root / name).write_text("old\n")
    fake_provider.add(
        stream(*tool_call_chunks([("write_text_content", {"path": "a.txt", "text": "new\n"})])),
        stream(*tool_call_chunks([("write_text_content", {"path": "b.txt", "text": "new\n"})])),
        stream(*text_chunks(REPLY)),
    )
    elsewhere = client_for(users["editor"], base_url=second_server)

    def allow(conversation: int, event: Event) -> None:
        response = elsewhere.post(
            f"/api/conversations/{conversation}/approve",
            json={"call": event.data["id"], "approve": True, "allow_for_conversation": True},
        )
        assert response.json() == {"delivered": True}

    events = chat_deciding(client_for(users["editor"]), project, rojo, allow)

    assert len(of_type(events, "APPROVAL_REQUIRED")) == 1
    assert [r.data["ok"] for r in of_type(events, "TOOL_RESULT")] == [True, True]
    conversation = Conversation.objects.get(pk=events[0].data["conversation"])
    assert conversation.allowed_tools == ["write_text_content"]
    assert (root / "b.txt").read_text() == "new\n"


def test_denial_sent_to_another_process_reaches_the_turn(
    second_server, client_for, users, project, rojo, fake_provider, root
):
    (root / "notes.txt").write_text("mine\n")
    script(fake_provider, ("delete_path", {"path": "notes.txt"}))
    elsewhere = client_for(users["editor"], base_url=second_server)

    events = chat_deciding(client_for(users["editor"]), project, rojo, deciding(elsewhere, False))

    assert decided_by() == [users["editor"].pk], "the denial did not reach the turn"
    assert of_type(events, "TOOL_RESULT")[0].data["result"] == DENIED
    assert (root / "notes.txt").read_text() == "mine\n"


def test_stop_sent_to_another_process_ends_the_waiting_turn(
    second_server, client_for, users, project, rojo, fake_provider, root
):
    (root / "notes.txt").write_text("mine\n")
    fake_provider.add(stream(*tool_call_chunks([("delete_path", {"path": "notes.txt"})])))
    elsewhere = client_for(users["editor"], base_url=second_server)

    def stop(conversation: int, event: Event) -> None:
        response = elsewhere.post(f"/api/conversations/{conversation}/stop")
        assert response.json() == {"stopping": True}

    events = chat_deciding(client_for(users["editor"]), project, rojo, stop)

    assert [e.type for e in events[-2:]] == ["ERROR", "DONE"]
    assert events[-2].data["code"] == "stopped"
    assert_history_valid(stored_history(events[0].data["conversation"]))
    assert (root / "notes.txt").read_text() == "mine\n"
