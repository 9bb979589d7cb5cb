"""Approvals routed to owners: with "changes need approval by an owner" on, a call that needs
approval in an editor's turn waits for an owner, who decides it from the Approvals inbox; every
decision is audited once. The turn runs on the live ASGI server, decisions are separate
requests; the last tests send them to a second server process (PostgreSQL + Redis)."""

import subprocess
import threading
import time
import uuid
from datetime import timedelta
from pathlib import Path

import httpx2
import pytest
from django.utils import timezone

from roject.identity.tokens import api_token_create, api_token_revoke
from roject.models import AuditAction, AuditEntry
from roject.storage import project_root_create
from rojos.models import Conversation, Message, PendingApproval, TurnRecord, default_tools
from rojos.models.claims import owner_host
from rojos.turns.decisions import OWNERS_ONLY
from tests.approvals.test_approvals import DENIED, REPLY, chat_deciding, of_type
from tests.support.fake_provider import stream, text_chunks, tool_call_chunks
from tests.support.helpers import make_rojo
from tests.support.live_server import ApiClient, Event, parse_sse

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def rojo(fake_provider, settings):
    settings.ROJO_PROVIDER_RETRIES = 0
    settings.ROJO_APPROVAL_TIMEOUT = 20
    settings.ROJO_OWNER_APPROVAL_TIMEOUT = 20
    return make_rojo(fake_provider.base_url, tools=[*default_tools(), "delete_path"])


@pytest.fixture
def routed(project):
    project.owner_approval = True
    project.save(update_fields=["owner_approval"])
    return project


@pytest.fixture
def root(project) -> Path:
    root = project_root_create(project.pk)
    (root / "notes.txt").write_text("mine\n")
    return root


def overwrite(fake_provider) -> None:
    """One model response overwriting notes.txt, then a plain reply."""
    call = ("write_text_content", {"path": "notes.txt", "text": "theirs\n"})
    fake_provider.add(stream(*tool_call_chunks([call])), stream(*text_chunks(REPLY)))


def inbox(client: ApiClient) -> list[dict]:
    response = client.get("/api/approvals")
    assert response.status_code == 200, response.text
    return response.json()


def decide(client: ApiClient, approval_id: int, approve: bool):
    return client.post(f"/api/approvals/{approval_id}/decide", json={"approve": approve})


def decisions() -> list[AuditEntry]:
    actions = [AuditAction.APPROVAL_GRANTED, AuditAction.APPROVAL_DENIED]
    return list(AuditEntry.objects.filter(action__in=actions))


def test_an_editors_call_waits_for_an_owner_who_approves_it_from_the_inbox(
    client_for, users, routed, rojo, fake_provider, root
):
    """The editor is told it waits for an owner and cannot decide it (403, a clear message);
    viewers, non-members and the editor do not find it in the inbox (404); the owner sees
    its diff there, approves, and the call runs; one audit entry records it."""
    overwrite(fake_provider)
    owner = client_for(users["owner"])
    editor = client_for(users["editor"])
    seen = {}

    def owner_decides(conversation: int, event: Event) -> None:
        assert event.data["routed"] is True
        refused = editor.post(
            f"/api/conversations/{conversation}/approve",
            json={"call": event.data["id"], "approve": True},
        )
        assert refused.status_code == 403
        assert refused.json() == {"detail": OWNERS_ONLY}
        [entry] = seen["inbox"] = inbox(owner)
        for other in ("editor", "viewer", "outsider"):
            assert inbox(client_for(users[other])) == []
            assert decide(client_for(users[other]), entry["id"], True).status_code == 404
        assert (root / "notes.txt").read_text() == "mine\n"
        response = decide(owner, entry["id"], True)
        assert response.status_code == 200, response.text
        assert response.json() == {"delivered": True}

    events = chat_deciding(editor, routed, rojo, owner_decides)

    [entry] = seen["inbox"]
    conversation = events[0].data["conversation"]
    assert entry["conversation"] == conversation
    assert (entry["tool"], entry["path"], entry["user"]) == (
        "write_text_content",
        "notes.txt",
        "editor",
    )
    assert entry["preview"]["diff"].endswith("-mine\n+theirs\n")
    assert of_type(events, "TOOL_RESULT")[0].data["ok"] is True
    assert (root / "notes.txt").read_text() == "theirs\n"
    assert not PendingApproval.objects.exists()
    [audited] = decisions()
    assert audited.action == AuditAction.APPROVAL_GRANTED
    assert audited.actor_user_id == users["owner"].pk
    assert audited.details == {
        "tool": "write_text_content",
        "path": "notes.txt",
        "conversation": conversation,
        "routed": True,
    }


def test_an_owner_denies_from_the_inbox_and_the_call_does_not_run(
    client_for, users, routed, rojo, fake_provider, root
):
    overwrite(fake_provider)
    owner = client_for(users["owner"])

    def owner_denies(conversation: int, event: Event) -> None:
        [entry] = inbox(owner)
        assert decide(owner, entry["id"], False).status_code == 200

    events = chat_deciding(client_for(users["editor"]), routed, rojo, owner_denies)

    assert of_type(events, "TOOL_RESULT")[0].data["result"] == DENIED
    assert (root / "notes.txt").read_text() == "mine\n"
    [audited] = decisions()
    assert (audited.action, audited.actor_user_id) == (
        AuditAction.APPROVAL_DENIED,
        users["owner"].pk,
    )
    assert audited.details["routed"] is True
    assert inbox(owner) == []


def test_a_routed_call_no_owner_decides_counts_as_denied_by_the_system(
    client_for, users, routed, rojo, fake_provider, root, settings
):
    """ROJO_OWNER_APPROVAL_TIMEOUT, not ROJO_APPROVAL_TIMEOUT, is the routed wait."""
    settings.ROJO_APPROVAL_TIMEOUT = 3600  # were it the routed wait, the reply would not end
    settings.ROJO_OWNER_APPROVAL_TIMEOUT = 1
    overwrite(fake_provider)

    events = chat_deciding(client_for(users["editor"]), routed, rojo)

    assert of_type(events, "TOOL_RESULT")[0].data["result"] == DENIED
    assert (root / "notes.txt").read_text() == "mine\n"
    [audited] = decisions()
    assert (audited.action, audited.actor_kind) == (AuditAction.APPROVAL_DENIED, "system")
    assert audited.details["timed_out"] is True and audited.details["routed"] is True
    assert not PendingApproval.objects.exists()


def test_the_turns_own_time_limit_does_not_cut_a_routed_wait_short(
    client_for, users, routed, rojo, fake_provider, root, settings
):
    """An owner deciding after the turn's ROJO_TURN_MAX_SECONDS still gets the call run."""
    # The turn's own work (two provider requests, the call) within 3 s even on a loaded
    # machine; the wait alone past it.
    settings.ROJO_TURN_MAX_SECONDS = 3
    overwrite(fake_provider)
    owner = client_for(users["owner"])

    def owner_approves_late(conversation: int, event: Event) -> None:
        time.sleep(4)
        [entry] = inbox(owner)
        assert decide(owner, entry["id"], True).status_code == 200

    events = chat_deciding(client_for(users["editor"]), routed, rojo, owner_approves_late)

    assert not of_type(events, "ERROR")
    assert of_type(events, "TOOL_RESULT")[0].data["ok"] is True
    assert (root / "notes.txt").read_text() == "theirs\n"


def test_with_the_setting_off_the_editor_decides_as_before_and_it_is_audited(
    client_for, users, project, rojo, fake_provider, root
):
    overwrite(fake_provider)
    editor = client_for(users["editor"])
    owner = client_for(users["owner"])

    def editor_approves(conversation: int, event: Event) -> None:
        assert "routed" not in event.data
        assert inbox(owner) == []
        response = editor.post(
            f"/api/conversations/{conversation}/approve",
            json={"call": event.data["id"], "approve": True},
        )
        assert response.status_code == 200, response.text

    events = chat_deciding(editor, project, rojo, editor_approves)

    assert (root / "notes.txt").read_text() == "theirs\n"
    [audited] = decisions()
    assert (audited.action, audited.actor_user_id) == (
        AuditAction.APPROVAL_GRANTED,
        users["editor"].pk,
    )
    assert audited.details == {
        "tool": "write_text_content",
        "path": "notes.txt",
        "conversation": events[0].data["conversation"],
        "routed": False,
    }


def test_an_owners_own_turn_is_not_routed(client_for, users, routed, rojo, fake_provider, root):
    overwrite(fake_provider)
    owner = client_for(users["owner"])

    def owner_approves(conversation: int, event: Event) -> None:
        assert "routed" not in event.data
        assert inbox(owner) == []
        response = owner.post(
            f"/api/conversations/{conversation}/approve",
            json={"call": event.data["id"], "approve": False},
        )
        assert response.status_code == 200, response.text

    events = chat_deciding(owner, routed, rojo, owner_approves)

    assert of_type(events, "TOOL_RESULT")[0].data["result"] == DENIED
    [audited] = decisions()
    assert (audited.action, audited.details["routed"]) == (AuditAction.APPROVAL_DENIED, False)


def test_a_stop_takes_the_call_out_of_the_inbox_undecided(
    client_for, users, routed, rojo, fake_provider, root
):
    """The turn ended: its waiting call leaves the inbox, with no decision audited."""
    fake_provider.add(stream(*tool_call_chunks([("delete_path", {"path": "notes.txt"})])))
    owner = client_for(users["owner"])
    editor = client_for(users["editor"])

    def editor_stops(conversation: int, event: Event) -> None:
        assert len(inbox(owner)) == 1
        assert editor.post(f"/api/conversations/{conversation}/stop").json() == {"stopping": True}

    events = chat_deciding(editor, routed, rojo, editor_stops)

    assert events[-2].data["code"] == "stopped"
    assert inbox(owner) == []
    assert not PendingApproval.objects.exists()
    assert decisions() == []
    assert (root / "notes.txt").read_text() == "mine\n"


def live_counts(client: ApiClient, counts: list[int], many: int) -> None:
    """Read the first `many` counts of the owner's live stream into `counts`."""
    with client.http.stream("GET", "/api/approvals/live") as response:
        assert response.status_code == 200
        for event in parse_sse(response.iter_lines()):
            counts.append(event.data["count"])
            if len(counts) == many:
                return


def test_the_owners_live_count_follows_the_inbox(
    client_for, users, routed, rojo, fake_provider, root, settings
):
    """`count` 0 at once, 1 within a second or two of the call waiting, 0 once decided."""
    settings.ROJO_LIVE_CHECK_SECONDS = 0.5
    overwrite(fake_provider)
    owner = client_for(users["owner"])
    counts: list[int] = []
    reader = threading.Thread(
        target=live_counts, args=(client_for(users["owner"]), counts, 3), daemon=True
    )
    reader.start()
    wait_for(lambda: counts == [0])

    def owner_approves(conversation: int, event: Event) -> None:
        wait_for(lambda: counts[-1:] == [1])
        [entry] = inbox(owner)
        assert decide(owner, entry["id"], True).status_code == 200

    chat_deciding(client_for(users["editor"]), routed, rojo, owner_approves)
    reader.join(timeout=3)
    assert counts == [0, 1, 0]


def dead_turn_waiting(project, rojo, user) -> Conversation:
    """A conversation whose turn's process died while a call of it waited for an owner: its
    claim names a gone process of this host (dead at once, its heartbeat still fresh), its
    record still runs, and the call is still in the owners' inbox."""
    gone = subprocess.Popen(["true"])
    gone.wait()
    conversation = Conversation.objects.create(
        project=project,
        rojo=rojo,
        user=user,
        turn_id=uuid.uuid4(),
        turn_heartbeat=timezone.now(),
        turn_owner=f"{owner_host()}:{gone.pid}:gonegonegone",
        approval_waiting=timezone.now(),
    )
    asked = Message.objects.create(
        conversation=conversation, position=0, role=Message.Role.USER, content="Tidy up."
    )
    TurnRecord.objects.create(conversation=conversation, user_message=asked, rojo=rojo, user=user)
    PendingApproval.objects.create(
        project=project,
        conversation=conversation,
        user=user,
        call_id="call-1",
        tool="delete_path",
        path="notes.txt",
        preview={},
        routed=True,
        expires=timezone.now() + timedelta(hours=1),
    )
    return conversation


@pytest.mark.parametrize("found_by", ["a read", "a new message"])
def test_the_owners_live_count_drops_a_dead_turns_call_at_once(
    client_for, users, routed, rojo, fake_provider, root, settings, found_by
):
    """A turn whose process died while its call waited for an owner is ended by whoever
    finds it (a read of the conversation, or its next message taking the claim over): its
    call leaves the inbox and the owners' live count says 0 at once, as when a call is
    decided, not at the next periodic check. Before, no news was sent and the count stayed
    at 1 until that check."""
    settings.ROJO_LIVE_CHECK_SECONDS = 60
    conversation = dead_turn_waiting(routed, rojo, users["editor"])
    counts: list[int] = []
    reader = threading.Thread(
        target=live_counts, args=(client_for(users["owner"]), counts, 2), daemon=True
    )
    reader.start()
    wait_for(lambda: counts == [1])

    editor = client_for(users["editor"])
    if found_by == "a read":
        assert editor.get(f"/api/conversations/{conversation.pk}").json()["running"] is False
    else:
        fake_provider.add(stream(*text_chunks(REPLY)))
        events = editor.chat(
            routed.pk, rojo=rojo.slug, message="Again", conversation=conversation.pk
        )
        assert events[-1].type == "DONE"

    wait_for(lambda: counts == [1, 0])
    assert not PendingApproval.objects.exists()
    reader.join(timeout=3)


@pytest.mark.parametrize("how", ["logout", "token revoked"])
def test_the_live_count_ends_once_its_session_logs_out_or_its_token_is_revoked(
    client_for, users, settings, how
):
    """Open, the stream goes on past several checks; logged out in another client (the
    same session) or with its API token revoked, it ends within the check interval."""
    settings.ROJO_LIVE_CHECK_SECONDS = 0.3
    live = client_for(users["owner"])
    if how == "token revoked":
        made = api_token_create(user=users["owner"], name="watch")
        live.http.cookies.clear()
        live.http.headers["Authorization"] = f"Bearer {made.secret}"
    counts: list[int] = []
    ended = threading.Event()

    def read() -> None:
        live_counts(live, counts, 99)
        ended.set()

    threading.Thread(target=read, daemon=True).start()
    wait_for(lambda: counts == [0])
    assert not ended.wait(timeout=1.2)  # four checks: still signed in, still open
    if how == "logout":
        other = httpx2.Client(base_url=live.http.base_url, cookies=dict(live.http.cookies))
        other.headers["X-CSRFToken"] = live.http.headers["X-CSRFToken"]
        assert other.post("/logout/").status_code == 302
        other.close()
    else:
        api_token_revoke(user=users["owner"], token_id=made.token.pk)
    assert ended.wait(timeout=1.5)


def wait_for(predicate, timeout: float = 3.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "not in time"
        time.sleep(0.05)


# the decision in another server process (second_server: tests/support/server_process.py)


def test_an_owner_approves_on_another_process_and_the_editors_call_runs(
    second_server, client_for, users, routed, rojo, fake_provider, root, settings
):
    """The editor's turn runs in this process; the owner's inbox, its live count and the
    decision are served by the other, which finds the call in the database, hears of it
    over Redis and delivers the decision over Redis."""
    overwrite(fake_provider)
    elsewhere = client_for(users["owner"], base_url=second_server)
    counts: list[int] = []
    reader = threading.Thread(
        target=live_counts,
        args=(client_for(users["owner"], base_url=second_server), counts, 3),
        daemon=True,
    )
    reader.start()
    wait_for(lambda: counts == [0], timeout=10)

    def owner_approves_elsewhere(conversation: int, event: Event) -> None:
        wait_for(lambda: counts[-1:] == [1])
        [entry] = inbox(elsewhere)
        assert entry["path"] == "notes.txt"
        response = decide(elsewhere, entry["id"], True)
        assert response.status_code == 200, response.text

    events = chat_deciding(client_for(users["editor"]), routed, rojo, owner_approves_elsewhere)

    assert of_type(events, "TOOL_RESULT")[0].data["ok"] is True
    assert (root / "notes.txt").read_text() == "theirs\n"
    reader.join(timeout=3)
    assert counts == [0, 1, 0]
    [audited] = decisions()
    assert (audited.actor_user_id, audited.details["routed"]) == (users["owner"].pk, True)


def test_a_tool_allowed_for_the_conversation_still_waits_for_an_owner_once_routed(
    client_for, users, project, rojo, fake_provider, root
):
    """An editor allows write_text_content for the conversation while the setting is off;
    once it is on, the editor's next overwrite there waits for an owner all the same."""
    (root / "a.txt").write_text("old\n")
    fake_provider.add(
        stream(*tool_call_chunks([("write_text_content", {"path": "a.txt", "text": "new\n"})])),
        stream(*text_chunks(REPLY)),
    )
    editor = client_for(users["editor"])

    def allow(conversation: int, event: Event) -> None:
        response = editor.post(
            f"/api/conversations/{conversation}/approve",
            json={"call": event.data["id"], "approve": True, "allow_for_conversation": True},
        )
        assert response.status_code == 200, response.text

    first = chat_deciding(editor, project, rojo, allow)
    conversation = first[0].data["conversation"]
    assert Conversation.objects.get(pk=conversation).allowed_tools == ["write_text_content"]
    project.owner_approval = True
    project.save(update_fields=["owner_approval"])
    overwrite(fake_provider)
    owner = client_for(users["owner"])
    asked = []
    with editor.chat_stream(
        project.pk, rojo=rojo.slug, message="Again", conversation=conversation
    ) as response:
        for event in parse_sse(response.iter_lines()):
            if event.type == "APPROVAL_REQUIRED":
                asked.append(event.data["routed"])
                [entry] = inbox(owner)
                assert decide(owner, entry["id"], False).status_code == 200

    assert asked == [True]
    assert (root / "notes.txt").read_text() == "mine\n"


def test_an_editors_allow_for_the_conversation_is_ignored_while_routed(
    client_for, users, routed, rojo, fake_provider, root
):
    """In an owner's turn (not routed) an editor may approve, but not allow the tool for
    the conversation: the call runs, allowed_tools stays empty."""
    overwrite(fake_provider)
    owner = client_for(users["owner"])
    editor = client_for(users["editor"])

    def editor_allows(conversation: int, event: Event) -> None:
        response = editor.post(
            f"/api/conversations/{conversation}/approve",
            json={"call": event.data["id"], "approve": True, "allow_for_conversation": True},
        )
        assert response.status_code == 200, response.text

    events = chat_deciding(owner, routed, rojo, editor_allows)

    assert (root / "notes.txt").read_text() == "theirs\n"
    conversation = Conversation.objects.get(pk=events[0].data["conversation"])
    assert conversation.allowed_tools == []
