"""Faults with nothing lost: a server killed mid-turn, a client gone mid-call, two turns writing
one file. Each leaves a valid history, whole files, and an error the user can read.

The killed server is a subprocess on the same database and storage dir; the next message goes
to the in-process server, as after a crash behind a load balancer.
"""

import json
import threading
from pathlib import Path

import httpx2
import pytest

from roject.storage import project_root_create, undo_dir
from rojos.agent.history import INTERRUPTED
from rojos.models import Conversation, FileChange, default_tools
from rojos.provider.request import wire_call_id
from rojos.turns.runner import INTERRUPTED_MESSAGE
from tests.support.fake_provider import Gate, stream, text_chunks, tool_call_chunks
from tests.support.helpers import (
    assert_history_valid,
    big_text,
    files_in,
    make_rojo,
    stored_history,
)
from tests.support.live_server import ApiClient, Event, parse_sse, read_until, wait_until
from tests.support.server_process import ServerProcess

pytestmark = pytest.mark.django_db(transaction=True)

HEARTBEAT_SECONDS = 0.2
# Long enough that a claim is still fresh right after a kill, short enough to wait out.
STALE_SECONDS = 2
REPLY = "Picked up again."


@pytest.fixture(autouse=True)
def quick_claims(settings):
    settings.ROJO_TURN_HEARTBEAT_SECONDS = HEARTBEAT_SECONDS
    settings.ROJO_TURN_STALE_SECONDS = STALE_SECONDS
    settings.ROJO_PROVIDER_RETRIES = 0


@pytest.fixture
def root(project) -> Path:
    return project_root_create(project.pk)


@pytest.fixture
def rojo(fake_provider):
    return make_rojo(fake_provider.base_url)


def doomed(server_process, **env: str) -> ServerProcess:
    """A server process, on the same database and storage dir, for a test to kill."""
    return server_process(
        ROJO_TURN_HEARTBEAT_SECONDS=str(HEARTBEAT_SECONDS),
        ROJO_TURN_STALE_SECONDS=str(STALE_SECONDS),
        ROJO_PROVIDER_RETRIES="0",
        ROJO_APPROVAL_TIMEOUT="60",
        **env,
    )


@pytest.fixture
def doomed_server(server_process) -> ServerProcess:
    return doomed(server_process)


def send_once_free(client: ApiClient, project, rojo, conversation: int) -> list[Event]:
    """Send "Again" to a conversation whose turn died: accepted at once, since the claim's
    owner was a process of this host that is gone (rojos.models.claims).

    Returns the events of the accepted turn.
    """
    url = f"/api/projects/{project.pk}/chat"
    body = {"rojo": rojo.slug, "message": "Again", "conversation": conversation}
    response = client.post(url, json=body)
    assert response.status_code == 200, response.text
    return list(parse_sse(response.text.splitlines()))


def picked_up(client_for, users, fake_provider, project, rojo, conversation: int):
    """The next message after a kill gets a plain reply; returns the client and the valid
    stored history."""
    fake_provider.add(stream(*text_chunks(REPLY)))
    survivor = client_for(users["editor"])
    again = send_once_free(survivor, project, rojo, conversation)
    assert [e.type for e in again] == ["START", "CHAT", "DONE"]
    history = stored_history(conversation)
    assert_history_valid(history)
    return survivor, history


def assert_killed_turn_recorded(client: ApiClient, conversation: int) -> None:
    """The killed turn reads as interrupted, with an error the chat, replay and export show."""
    detail = client.get(f"/api/conversations/{conversation}").json()
    assert detail["running"] is False
    killed, next_one = detail["turns"]
    assert killed["status"] == "interrupted"
    assert (killed["error"], killed["error_code"]) == (INTERRUPTED_MESSAGE, "interrupted")
    assert "server running this reply stopped" in killed["error"]
    assert (next_one["status"], next_one["error"]) == ("done", "")


# a server killed mid-turn


def test_killed_while_a_call_waits_for_approval_the_next_message_answers_it_interrupted(
    client_for, users, project, rojo, fake_provider, root, doomed_server
):
    (root / "notes.txt").write_text("mine\n")
    overwrite = ("write_text_content", {"path": "notes.txt", "text": big_text("x")})
    fake_provider.add(stream(*tool_call_chunks([overwrite], arguments="whole")))
    client = client_for(users["editor"], base_url=doomed_server.base_url)

    with client.chat_stream(project.pk, rojo=rojo.slug, message="Go") as response:
        events = parse_sse(response.iter_lines())
        seen = read_until(events, "APPROVAL_REQUIRED")
        doomed_server.kill()
        with pytest.raises(httpx2.RemoteProtocolError):
            next(events)
    assert [e.type for e in seen] == ["START", "TOOL_CALL", "APPROVAL_REQUIRED"]
    conversation, call_id = seen[0].data["conversation"], seen[1].data["id"]

    survivor, history = picked_up(client_for, users, fake_provider, project, rojo, conversation)

    assert [m.role for m in history] == ["user", "assistant", "tool", "user", "assistant"]
    closed = history[2]
    assert (closed.tool_call_id, closed.is_error) == (call_id, True)
    assert json.loads(closed.content) == INTERRUPTED
    assert fake_provider.requests[-1]["messages"][2:] == [
        {"role": "tool", "tool_call_id": wire_call_id(call_id), "content": json.dumps(INTERRUPTED)},
        {"role": "user", "content": "Again"},
    ]
    assert_killed_turn_recorded(survivor, conversation)
    assert files_in(root) == {"notes.txt": "mine\n"}
    assert FileChange.objects.count() == 0


def test_killed_while_a_call_waits_for_an_owner_the_wait_ends_with_the_turn(
    client_for, users, project, rojo, fake_provider, root, doomed_server
):
    """A routed wait, its process killed, and the turn ended by a read elsewhere (not by
    the next message): the wait leaves the owners' inbox and the conversation's badge with
    the turn. Before, it stayed: the next turn of the conversation read as waiting for an
    approval, and the owners' inbox offered the dead call again for its hour."""
    project.owner_approval = True
    project.save(update_fields=["owner_approval"])
    (root / "notes.txt").write_text("mine\n")
    overwrite = ("write_text_content", {"path": "notes.txt", "text": "theirs\n"})
    fake_provider.add(stream(*tool_call_chunks([overwrite])))
    client = client_for(users["editor"], base_url=doomed_server.base_url)
    with client.chat_stream(project.pk, rojo=rojo.slug, message="Go") as response:
        seen = read_until(parse_sse(response.iter_lines()), "APPROVAL_REQUIRED")
        doomed_server.kill()
    assert seen[-1].data["routed"] is True
    conversation = seen[0].data["conversation"]
    survivor, owner = client_for(users["editor"]), client_for(users["owner"])

    detail = survivor.get(f"/api/conversations/{conversation}").json()  # ends the dead turn

    assert detail["running"] is False
    assert detail["turns"][0]["status"] == "interrupted"
    released = threading.Event()
    fake_provider.add(stream(text_chunks("Again ", finish=None), Gate(released), text_chunks(".")))
    with survivor.chat_stream(
        project.pk, rojo=rojo.slug, message="Again", conversation=conversation
    ) as response:
        events = parse_sse(response.iter_lines())
        read_until(events, "CHAT")
        inbox = owner.get("/api/approvals").json()
        [listed] = survivor.get(f"/api/projects/{project.pk}/conversations").json()
        released.set()
        rest = list(events)
    assert inbox == []
    assert (listed["status"], listed["waiting_approval"]) == ("running", False)
    assert [e.type for e in rest][-1] == "DONE" and "ERROR" not in [e.type for e in rest]
    assert files_in(root) == {"notes.txt": "mine\n"}


def test_killed_mid_text_the_finished_call_and_its_file_are_kept(
    client_for, users, project, rojo, fake_provider, root, doomed_server
):
    page = big_text("p")
    fake_provider.add(
        stream(
            *tool_call_chunks(
                [("write_text_content", {"path": "docs/page.md", "text": page})], arguments="whole"
            )
        ),
        stream(*text_chunks("w " * 200, pieces=200), delay=0.05),
    )
    client = client_for(users["editor"], base_url=doomed_server.base_url)

    with client.chat_stream(project.pk, rojo=rojo.slug, message="Go") as response:
        events = parse_sse(response.iter_lines())
        seen = read_until(events, "CHAT", count=3)
        doomed_server.kill()
        with pytest.raises(httpx2.RemoteProtocolError):
            list(events)
    assert [e.type for e in seen] == ["START", "TOOL_CALL", "TOOL_RESULT", "CHAT", "CHAT", "CHAT"]
    conversation = seen[0].data["conversation"]

    survivor, history = picked_up(client_for, users, fake_provider, project, rojo, conversation)

    # The text streamed after the call was never stored: it died with the process.
    assert [m.role for m in history] == ["user", "assistant", "tool", "user", "assistant"]
    assert json.loads(history[2].content) == {"ok": True}
    assert [m["role"] for m in fake_provider.requests[-1]["messages"]] == [
        "user",
        "assistant",
        "tool",
        "user",
    ]
    assert_killed_turn_recorded(survivor, conversation)
    assert files_in(root) == {"docs/page.md": page}
    change = FileChange.objects.get()
    assert (change.conversation_id, change.paths) == (conversation, ["docs/page.md"])


def test_killed_mid_text_the_text_saved_so_far_survives(
    client_for, users, project, rojo, fake_provider, server_process
):
    """While a reply streams its text is saved every ROJO_DRAFT_SECONDS: a kill loses less."""
    server = doomed(server_process, ROJO_DRAFT_SECONDS="0.1")
    # Held after 60 pieces until the kill: the reply still streams (its text a draft) when
    # the checks below are made, however long a loaded machine takes over them.
    chunks = text_chunks("w " * 200, pieces=200)
    chunks.insert(60, Gate(killed := threading.Event()))
    fake_provider.add(stream(*chunks, delay=0.02))
    client = client_for(users["editor"], base_url=server.base_url)

    with client.chat_stream(project.pk, rojo=rojo.slug, message="Go") as response:
        events = parse_sse(response.iter_lines())
        seen = read_until(events, "CHAT", count=40)
        conversation = seen[0].data["conversation"]
        wait_until(lambda: len(stored_history(conversation)) == 2)
        assert stored_history(conversation)[1].draft  # not indexed while it streams
        assert found_messages(client, "w") == []
        server.kill()
        killed.set()
        with pytest.raises(httpx2.RemoteProtocolError):
            list(events)

    streamed = "".join(e.data["text"] for e in seen if e.type == "CHAT")
    history = stored_history(conversation)
    assert [m.role for m in history] == ["user", "assistant"]
    # Saved while the reply went on past what this client read before the kill (the
    # checks above take time): a start of the whole reply, not all of it.
    assert history[1].content and ("w " * 200).startswith(history[1].content)
    assert len(history[1].content) < len("w " * 200) and streamed
    assert history[1].tool_calls is None

    survivor, after = picked_up(client_for, users, fake_provider, project, rojo, conversation)
    sent = fake_provider.requests[-1]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    assert sent[1]["content"] == history[1].content
    # The kept text is the reply now: searchable, as is the next turn's finished reply.
    assert [m.draft for m in after] == [False] * 4
    assert found_messages(survivor, "w") == [after[1].pk]
    assert found_messages(survivor, "picked") == [after[3].pk]


def found_messages(client: ApiClient, query: str) -> list[int]:
    """The ids of the messages the search API finds for `query`."""
    hits = client.get("/api/search", params={"q": query}).json()
    return [hit["message"] for hit in hits if hit["message"] is not None]


def test_killed_mid_write_the_file_stays_whole_and_the_half_write_is_nowhere(
    client_for, users, project, fake_provider, root, server_process
):
    hanging_writes = doomed(server_process, ROJO_TOOL_MODULES="tests.support.crash_points")
    rojo = make_rojo(fake_provider.base_url, approval_tools=[])
    (root / "notes.txt").write_text("mine\n")
    text = big_text("x")
    overwrite = ("write_text_content", {"path": "notes.txt", "text": text})
    fake_provider.add(stream(*tool_call_chunks([overwrite], arguments="whole")))
    client = client_for(users["editor"], base_url=hanging_writes.base_url)

    def temp_file_written() -> bool:
        return any(p.stat().st_size == len(text) for p in root.glob(".rojo-*.tmp"))

    with client.chat_stream(project.pk, rojo=rojo.slug, message="Go") as response:
        seen = read_until(parse_sse(response.iter_lines()), "TOOL_CALL")
        wait_until(temp_file_written)
        hanging_writes.kill()
    conversation, call_id = seen[0].data["conversation"], seen[1].data["id"]

    search = ("search_text", {"query": "x line 00000"})
    fake_provider.add(
        stream(*tool_call_chunks([search])), stream(*text_chunks("Nothing was written."))
    )
    survivor = client_for(users["editor"])
    again = send_once_free(survivor, project, rojo, conversation)

    assert [e.type for e in again] == ["START", "TOOL_CALL", "TOOL_RESULT", "CHAT", "DONE"]
    assert again[2].data["result"] == {"matches": [], "cut": False}
    history = stored_history(conversation)
    assert_history_valid(history)
    assert (history[2].tool_call_id, json.loads(history[2].content)) == (call_id, INTERRUPTED)
    assert_killed_turn_recorded(survivor, conversation)
    assert (root / "notes.txt").read_text() == "mine\n"
    listing = survivor.get(f"/api/projects/{project.pk}/files").json()
    assert listing == [{"name": "notes.txt", "type": "file"}]
    assert FileChange.objects.count() == 0
    assert list(root.glob(".rojo-*.tmp")) == []  # the cut-off write's leftover is gone


def overwrite_of_notes(fake_provider, root: Path):
    """notes.txt says "mine"; the model replaces it without asking. Returns the rojo."""
    (root / "notes.txt").write_text("mine\n")
    overwrite = ("write_text_content", {"path": "notes.txt", "text": "theirs\n"})
    fake_provider.add(stream(*tool_call_chunks([overwrite], arguments="whole")))
    return make_rojo(fake_provider.base_url, approval_tools=[])


def test_killed_after_a_write_landed_its_change_can_still_be_undone(
    client_for, users, project, fake_provider, root, server_process
):
    """The file changed, then the process died before storing the call's result."""
    hanging = doomed(
        server_process,
        ROJO_TOOL_MODULES="tests.support.crash_points",
        ROJO_TEST_HANG_AFTER_RENAME="1",
    )
    rojo = overwrite_of_notes(fake_provider, root)
    client = client_for(users["editor"], base_url=hanging.base_url)

    with client.chat_stream(project.pk, rojo=rojo.slug, message="Go") as response:
        seen = read_until(parse_sse(response.iter_lines()), "TOOL_CALL")
        wait_until(lambda: (root / "notes.txt").read_text() == "theirs\n")
        hanging.kill()
    conversation, call_id = seen[0].data["conversation"], seen[1].data["id"]
    assert FileChange.objects.get().after is None  # recorded before the call ran

    survivor, history = picked_up(client_for, users, fake_provider, project, rojo, conversation)

    assert (history[2].tool_call_id, json.loads(history[2].content)) == (call_id, INTERRUPTED)
    change = FileChange.objects.get()
    assert (change.tool_call_id, change.message_id) == (call_id, history[1].pk)
    assert change.after is not None  # finished when the conversation went on
    undone = survivor.post(f"/api/changes/{change.pk}/undo")
    assert undone.status_code == 200, undone.text
    assert (root / "notes.txt").read_text() == "mine\n"


def test_killed_before_a_write_landed_leaves_no_change_to_undo(
    client_for, users, project, fake_provider, root, server_process
):
    """The record stored before the call is dropped once it shows the call changed nothing."""
    hanging = doomed(server_process, ROJO_TOOL_MODULES="tests.support.crash_points")
    rojo = overwrite_of_notes(fake_provider, root)
    client = client_for(users["editor"], base_url=hanging.base_url)

    with client.chat_stream(project.pk, rojo=rojo.slug, message="Go") as response:
        read_until(parse_sse(response.iter_lines()), "TOOL_CALL")
        wait_until(lambda: any(root.glob(".rojo-*.tmp")))
        hanging.kill()
    change = FileChange.objects.get()
    undo_copies = undo_dir(project.pk, change.key)
    assert undo_copies.is_dir()

    picked_up(client_for, users, fake_provider, project, rojo, change.conversation_id)

    assert FileChange.objects.count() == 0
    assert not undo_copies.exists()
    assert (root / "notes.txt").read_text() == "mine\n"


# a client gone while a call runs


def test_client_gone_mid_call_the_turn_finishes_and_keeps_everything(
    client_for, users, project, fake_provider, root, held_write
):
    rojo = make_rojo(fake_provider.base_url, tools=[*default_tools(), held_write.name])
    text = big_text("h")
    fake_provider.add(
        stream(
            *tool_call_chunks(
                [(held_write.name, {"path": "big.txt", "text": text})], arguments="whole"
            )
        ),
        stream(*text_chunks("Wrote big.txt.")),
    )
    client = client_for(users["editor"])

    with client.chat_stream(project.pk, rojo=rojo.slug, message="Write it") as response:
        seen = read_until(parse_sse(response.iter_lines()), "TOOL_CALL")
        assert held_write.started.wait(10)
    held_write.release.set()

    conversation = seen[0].data["conversation"]
    wait_until(lambda: Conversation.objects.get(pk=conversation).turn_id is None)
    detail = client.get(f"/api/conversations/{conversation}").json()
    assert detail["running"] is False
    assert [m["role"] for m in detail["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert detail["messages"][-1]["content"] == "Wrote big.txt."
    assert detail["turns"] == [
        {
            "user_message_id": seen[0].data["message"],
            "status": "done",
            "error": "",
            "error_code": "",
        }
    ]
    assert_history_valid(stored_history(conversation))
    assert files_in(root) == {"big.txt": text}
    assert [c["paths"] for c in detail["changes"]] == [["big.txt"]]


# two turns writing one file


def test_two_turns_writing_one_file_at_once_leave_it_whole_and_both_undoable(
    client_for, users, project, fake_provider, root
):
    rojo = make_rojo(fake_provider.base_url, approval_tools=[])
    (root / "shared.txt").write_text("original\n")
    texts = [big_text("a"), big_text("b")]
    together = threading.Barrier(2)
    fake_provider.add(
        *(
            stream(
                *tool_call_chunks(
                    [("write_text_content", {"path": "shared.txt", "text": t})], arguments="whole"
                ),
                together=together,
            )
            for t in texts
        ),
        stream(*text_chunks("Written.")),
        stream(*text_chunks("Written.")),
    )
    clients = [client_for(users["editor"]), client_for(users["owner"])]

    with (
        clients[0].chat_stream(project.pk, rojo=rojo.slug, message="Write A") as first,
        clients[1].chat_stream(project.pk, rojo=rojo.slug, message="Write B") as second,
    ):
        runs = [list(parse_sse(r.iter_lines())) for r in (first, second)]

    wrote = {}
    for events in runs:
        assert [e.type for e in events] == ["START", "TOOL_CALL", "TOOL_RESULT", "CHAT", "DONE"]
        assert events[2].data["ok"] is True
        conversation = events[0].data["conversation"]
        assert_history_valid(stored_history(conversation))
        wrote[conversation] = events[1].data["args"]["text"]
    assert sorted(wrote.values()) == texts
    final = (root / "shared.txt").read_text()
    assert final in texts
    assert files_in(root) == {"shared.txt": final}

    changes = {c.conversation_id: c for c in FileChange.objects.all()}
    assert set(changes) == set(wrote)
    assert all(c.paths == ["shared.txt"] for c in changes.values())
    last = next(conv for conv, text in wrote.items() if text == final)
    earlier = next(conv for conv in wrote if conv != last)
    editor = clients[0]

    refused = editor.post(f"/api/changes/{changes[earlier].pk}/undo")
    assert refused.status_code == 409, "undoing the overwritten write would lose the last one"
    assert "changed since" in refused.json()["detail"]
    assert (root / "shared.txt").read_text() == final

    assert editor.post(f"/api/changes/{changes[last].pk}/undo").status_code == 200
    assert (root / "shared.txt").read_text() == wrote[earlier]
    assert editor.post(f"/api/changes/{changes[earlier].pk}/undo").status_code == 200
    assert files_in(root) == {"shared.txt": "original\n"}
