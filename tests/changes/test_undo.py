"""Undo: every change a rojo makes is recorded outside the root and can be reversed exactly.

Turns run on the live ASGI server with a rojo that asks no approval, so each call runs at once.
"""

import asyncio
import json
import os
import threading
import time
import uuid
from pathlib import Path

import pytest
from django.urls import reverse
from django.utils import timezone

from roject.members.projects import project_create
from roject.storage import Snapshot, changes_locked, digests, project_root_create, snapshot_take
from rojos.changes.undo import UndoRefused, change_undo, changes_undo
from rojos.models import Conversation, FileChange, Message, default_tools
from tests.support.fake_provider import stream, text_chunks, tool_call_chunks
from tests.support.helpers import make_rojo
from tests.support.live_server import ApiClient, Event

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def rojo(fake_provider, settings):
    settings.ROJO_PROVIDER_RETRIES = 0
    return make_rojo(
        fake_provider.base_url, tools=[*default_tools(), "delete_path"], approval_tools=[]
    )


@pytest.fixture
def root(project) -> Path:
    return project_root_create(project.pk)


@pytest.fixture
def editor(client_for, users) -> ApiClient:
    return client_for(users["editor"])


@pytest.fixture
def run_turn(editor, project, rojo, fake_provider):
    """Run one turn whose model makes `calls` (one response), then replies; returns its events."""

    def run(*calls: tuple[str, dict], conversation: int | None = None) -> list[Event]:
        fake_provider.add(stream(*tool_call_chunks(list(calls))), stream(*text_chunks("Done.")))
        extra = {} if conversation is None else {"conversation": conversation}
        events = editor.chat(project.pk, rojo=rojo.slug, message="Go", **extra)
        assert events[-1].type == "DONE" and not [e for e in events if e.type == "ERROR"]
        return events

    return run


def results(events: list[Event]) -> list[dict]:
    return [event.data for event in events if event.type == "TOOL_RESULT"]


def changes_of(events: list[Event]) -> list[int]:
    return [data["change"] for data in results(events)]


def build(root: Path, spec: dict) -> None:
    """Files from {path: text}, directories from {path: None}, links from {path: ("->", to)}."""
    for relative, content in spec.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        if content is None:
            path.mkdir()
        elif isinstance(content, tuple):
            path.symlink_to(content[1])
        else:
            path.write_text(content)


def tree(root: Path) -> dict[str, str]:
    """Everything under `root`: each file's text, "<dir>" for a directory, "-> x" for a link."""
    entries = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            relative = str(path.relative_to(root))
            if path.is_symlink():
                entries[relative] = "-> " + os.readlink(path)
            elif path.is_dir():
                entries[relative] = "<dir>"
            else:
                entries[relative] = path.read_text()
    return dict(sorted(entries.items()))


def undo_records(storage_dir: Path, project) -> list[Path]:
    undo = storage_dir / str(project.pk) / "undo"
    return sorted(undo.iterdir()) if undo.exists() else []


# each kind of change


TREE = {
    "docs/index.md": "# Docs\n",
    "docs/guide/setup.md": "Install it.\n",
    "docs/guide/empty": None,
    "docs/latest": ("->", "guide/setup.md"),
}

KINDS = {
    "write of a new file": ({}, ("write_text_content", {"path": "new.txt", "text": "new\n"})),
    "write of a new file in new directories": (
        {},
        ("write_text_content", {"path": "a/b/new.txt", "text": "new\n"}),
    ),
    "overwrite": (
        {"notes.txt": "old\n"},
        ("write_text_content", {"path": "notes.txt", "text": "new\n"}),
    ),
    "edit": (
        {"notes.txt": "one\ntwo\n"},
        (
            "edit_text_content",
            {"path": "notes.txt", "edits": [{"old_text": "two", "new_text": "2"}]},
        ),
    ),
    "move": ({"a.txt": "a\n"}, ("move_path", {"source": "a.txt", "destination": "b.txt"})),
    "move into a new directory": (
        {"a.txt": "a\n"},
        ("move_path", {"source": "a.txt", "destination": "archive/2024/a.txt"}),
    ),
    "move replacing a file": (
        {"a.txt": "a\n", "b.txt": "b\n"},
        ("move_path", {"source": "a.txt", "destination": "b.txt", "overwrite": True}),
    ),
    "move of a directory": (TREE, ("move_path", {"source": "docs", "destination": "manual"})),
    "delete of a file": ({"notes.txt": "keep me\n"}, ("delete_path", {"path": "notes.txt"})),
    "delete of a directory tree": (TREE, ("delete_path", {"path": "docs", "recursive": True})),
    "create_directory": ({}, ("create_directory", {"path": "made"})),
    "create_directory with parents": ({"x": None}, ("create_directory", {"path": "x/y/z"})),
}


@pytest.mark.parametrize(("spec", "call"), KINDS.values(), ids=KINDS.keys())
def test_undo_restores_exactly_the_state_before_the_change(run_turn, editor, root, spec, call):
    build(root, spec)
    before = tree(root)

    events = run_turn(call)

    assert results(events)[0]["ok"] is True
    assert tree(root) != before
    [change] = changes_of(events)
    response = editor.post(f"/api/changes/{change}/undo")
    assert response.status_code == 200, response.text
    assert response.json() == {"undone": [change]}
    assert tree(root) == before
    assert FileChange.objects.get(pk=change).undone is not None


def test_undo_keeps_a_directory_the_call_created_once_it_holds_newer_work(run_turn, editor, root):
    [change] = changes_of(run_turn(("write_text_content", {"path": "a/b/new.txt", "text": "x"})))
    (root / "a" / "mine.txt").write_text("a person's file\n")

    assert editor.post(f"/api/changes/{change}/undo").status_code == 200

    assert tree(root) == {"a": "<dir>", "a/mine.txt": "a person's file\n"}


def test_a_write_through_a_symlink_is_undone_on_the_target(run_turn, editor, root):
    build(root, {"real.txt": "old\n", "link.txt": ("->", "real.txt")})

    events = run_turn(("write_text_content", {"path": "link.txt", "text": "new\n"}))

    [change] = changes_of(events)
    assert FileChange.objects.get(pk=change).paths == ["real.txt"]
    assert tree(root) == {"link.txt": "-> real.txt", "real.txt": "new\n"}
    assert editor.post(f"/api/changes/{change}/undo").status_code == 200
    assert tree(root) == {"link.txt": "-> real.txt", "real.txt": "old\n"}


@pytest.mark.parametrize(
    "call",
    [
        ("create_directory", {"path": "existing"}),
        ("edit_text_content", {"path": "notes.txt", "edits": [{"old_text": "?", "new_text": "!"}]}),
        ("move_path", {"source": "missing.txt", "destination": "b.txt"}),
    ],
    ids=["create_directory of an existing directory", "failed edit", "failed move"],
)
def test_a_call_that_changed_nothing_records_no_change(run_turn, root, project, storage_dir, call):
    build(root, {"existing": None, "notes.txt": "text\n"})
    before = tree(root)

    events = run_turn(call)

    assert "change" not in results(events)[0]
    assert tree(root) == before
    assert FileChange.objects.count() == 0
    assert undo_records(storage_dir, project) == []


def test_a_folder_whose_contents_cannot_be_copied_for_undo_is_not_deleted(
    run_turn, root, project, storage_dir
):
    """A FIFO in it: the snapshot cannot copy it, so the deletion is refused, not made
    with no record and nothing to undo it by (before, the whole folder went)."""
    build(root, {"work/notes.txt": "notes\n", "work/src/main.py": "print()\n"})
    os.mkfifo(root / "work" / "build.fifo")

    events = run_turn(("delete_path", {"path": "work", "recursive": True}))

    (result,) = results(events)
    assert result["ok"] is False and "build.fifo" in str(result["result"])
    assert "nothing was changed" in str(result["result"])
    assert (root / "work" / "src" / "main.py").read_text() == "print()\n"
    assert FileChange.objects.count() == 0 and undo_records(storage_dir, project) == []


# where undo records live


def test_undo_records_live_outside_the_project_root(run_turn, editor, root, project, storage_dir):
    build(root, {"notes.txt": "old notes\n", "docs/a.md": "A\n"})

    events = run_turn(
        ("write_text_content", {"path": "notes.txt", "text": "new notes\n"}),
        ("delete_path", {"path": "docs", "recursive": True}),
    )

    assert tree(root) == {"notes.txt": "new notes\n"}
    overwrite, delete = (FileChange.objects.get(pk=pk) for pk in changes_of(events))
    undo = storage_dir / str(project.pk) / "undo"
    assert not undo.is_relative_to(root) and not root.is_relative_to(undo)
    assert undo_records(storage_dir, project) == sorted([undo / overwrite.key, undo / delete.key])
    assert (undo / overwrite.key / "0").read_text() == "old notes\n"
    assert (undo / delete.key / "0" / "a.md").read_text() == "A\n"

    assert editor.post(f"/api/changes/{overwrite.pk}/undo").status_code == 200
    assert undo_records(storage_dir, project) == [undo / delete.key]


# refusals


def test_undo_is_refused_when_the_file_changed_since(run_turn, editor, root):
    build(root, {"notes.txt": "old\n"})
    [change] = changes_of(run_turn(("write_text_content", {"path": "notes.txt", "text": "new\n"})))
    (root / "notes.txt").write_text("newer, by a person\n")

    response = editor.post(f"/api/changes/{change}/undo")

    assert response.status_code == 409
    assert response.json() == {
        "detail": "notes.txt changed since the rojo's write_text_content; "
        "undo refused so that newer work is not lost"
    }
    assert (root / "notes.txt").read_text() == "newer, by a person\n"
    assert FileChange.objects.get(pk=change).undone is None

    # Back as the rojo left it, the change can be undone after all.
    (root / "notes.txt").write_text("new\n")
    assert editor.post(f"/api/changes/{change}/undo").status_code == 200
    assert (root / "notes.txt").read_text() == "old\n"


def test_a_change_whose_key_leads_out_of_its_undo_copies_is_not_undone(
    run_turn, editor, root, storage_dir
):
    """A restored archive's row (its digests agree: made to harm) naming `../../../outside`:
    the undo copied that directory in, then deleted it."""
    outside = storage_dir.parent / "outside"
    outside.mkdir()
    (outside / "0").write_text("SECRET outside\n")
    build(root, {"notes.txt": "old\n"})
    [change] = changes_of(run_turn(("write_text_content", {"path": "notes.txt", "text": "new\n"})))
    FileChange.objects.filter(pk=change).update(key="../../../outside")

    response = editor.post(f"/api/changes/{change}/undo")

    assert response.status_code in (400, 409), response.content
    assert (root / "notes.txt").read_text() == "new\n"
    assert (outside / "0").read_text() == "SECRET outside\n"
    assert FileChange.objects.get(pk=change).undone is None


def test_undo_of_a_deletion_is_refused_when_the_path_was_made_again(run_turn, editor, root):
    build(root, {"notes.txt": "old\n"})
    [change] = changes_of(run_turn(("delete_path", {"path": "notes.txt"})))
    (root / "notes.txt").write_text("a new file\n")

    response = editor.post(f"/api/changes/{change}/undo")

    assert response.status_code == 409
    assert "changed since" in response.json()["detail"]
    assert (root / "notes.txt").read_text() == "a new file\n"


def _lock_held(project_id: int):
    """The project's change lock, held by this thread (as a long change would) until closed."""
    import fcntl

    from roject.storage.locks import change_lock_open

    fd = change_lock_open(project_id)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


def test_an_undo_that_waited_for_the_lock_is_refused_once_its_sender_was_removed(
    run_turn, editor, root, project, users
):
    """The role is read again once the lock is held, as a person's own change reads it:
    removed while the undo waited, its sender undoes nothing."""
    from roject.members.services import member_remove

    events = run_turn(("write_text_content", {"path": "notes.txt", "text": "rojo's\n"}))
    (change,) = changes_of(events)
    held = _lock_held(project.pk)
    answers = []
    waiting = threading.Thread(
        target=lambda: answers.append(editor.post(f"/api/changes/{change}/undo"))
    )
    waiting.start()
    try:
        time.sleep(0.5)  # the undo waits for the lock
        assert answers == []
        member_remove(by=users["owner"], project_id=project.pk, user_id=users["editor"].pk)
    finally:
        os.close(held)
    waiting.join(30)

    assert answers[0].status_code == 403, answers[0].text
    assert (root / "notes.txt").read_text() == "rojo's\n"
    assert FileChange.objects.get(pk=change).undone is None


def test_undo_twice_is_refused_and_touches_nothing(run_turn, editor, root):
    [change] = changes_of(run_turn(("write_text_content", {"path": "new.txt", "text": "v1\n"})))
    assert editor.post(f"/api/changes/{change}/undo").status_code == 200
    (root / "new.txt").write_text("v1\n")  # a person writes the same file again

    response = editor.post(f"/api/changes/{change}/undo")

    assert response.status_code == 409
    assert response.json() == {"detail": "this change was undone already"}
    assert (root / "new.txt").read_text() == "v1\n"


# undoing a whole turn


def test_undo_turn_undoes_its_changes_newest_first_and_leaves_other_turns(run_turn, editor, root):
    build(root, {"b.txt": "b\n"})
    first = run_turn(
        ("write_text_content", {"path": "a.txt", "text": "a\n"}),
        ("edit_text_content", {"path": "a.txt", "edits": [{"old_text": "a", "new_text": "A"}]}),
        ("write_text_content", {"path": "b.txt", "text": "B\n"}),
    )
    conversation, message = first[0].data["conversation"], first[0].data["message"]
    second = run_turn(
        ("write_text_content", {"path": "c.txt", "text": "c\n"}), conversation=conversation
    )
    assert tree(root) == {"a.txt": "A\n", "b.txt": "B\n", "c.txt": "c\n"}

    response = editor.post(
        f"/api/conversations/{conversation}/undo-turn", json={"message": message}
    )

    assert response.status_code == 200, response.text
    assert response.json() == {"undone": changes_of(first)[::-1]}
    assert tree(root) == {"b.txt": "b\n", "c.txt": "c\n"}
    [kept] = changes_of(second)
    assert FileChange.objects.get(pk=kept).undone is None


def test_undo_turn_stops_at_the_first_change_that_cannot_be_undone(run_turn, editor, root):
    events = run_turn(
        ("write_text_content", {"path": "a.txt", "text": "a\n"}),
        ("write_text_content", {"path": "b.txt", "text": "b\n"}),
    )
    (root / "a.txt").write_text("edited by a person\n")
    conversation, message = events[0].data["conversation"], events[0].data["message"]

    response = editor.post(
        f"/api/conversations/{conversation}/undo-turn", json={"message": message}
    )

    assert response.status_code == 409
    assert response.json()["detail"].startswith("a.txt changed since")
    assert tree(root) == {"a.txt": "edited by a person\n"}
    older, newer = changes_of(events)
    assert FileChange.objects.get(pk=newer).undone is not None
    assert FileChange.objects.get(pk=older).undone is None


def test_undo_turn_needs_the_id_of_a_user_message(run_turn, editor):
    events = run_turn(("write_text_content", {"path": "a.txt", "text": "a\n"}))
    conversation = events[0].data["conversation"]
    assistant = FileChange.objects.get().message_id

    response = editor.post(
        f"/api/conversations/{conversation}/undo-turn", json={"message": assistant}
    )

    assert response.status_code == 404
    assert FileChange.objects.get().undone is None


def test_after_an_undo_the_model_is_told_the_files_were_put_back(
    run_turn, editor, root, project, rojo, fake_provider
):
    """Undo of a turn's write, then the next message: the model's history still holds the
    call and its {"ok": true}, which the page shows, and now also that the user undid it;
    before, it was told nothing, believed a.txt held its text, and said so."""
    build(root, {"b.txt": "b\n"})
    events = run_turn(
        ("write_text_content", {"path": "a.txt", "text": "a\n"}),
        ("write_text_content", {"path": "b.txt", "text": "B\n"}),
    )
    conversation, message = events[0].data["conversation"], events[0].data["message"]
    response = editor.post(
        f"/api/conversations/{conversation}/undo-turn", json={"message": message}
    )
    assert response.status_code == 200, response.text
    assert tree(root) == {"b.txt": "b\n"}

    fake_provider.add(stream(*text_chunks("a.txt is gone; b.txt is back.")))
    editor.chat(project.pk, rojo=rojo.slug, message="What is in a.txt?", conversation=conversation)

    sent = fake_provider.requests[-1]["messages"]
    results = [m["content"] for m in sent if m["role"] == "tool"]
    assert results == [
        '{"ok": true}\n\n[The user undid this change afterwards: a.txt was put back as it '
        "was before this call.]",
        '{"ok": true}\n\n[The user undid this change afterwards: b.txt was put back as it '
        "was before this call.]",
    ]
    shown = editor.get(f"/api/conversations/{conversation}").json()
    assert [m["content"] for m in shown["messages"] if m["role"] == "tool"] == [
        '{"ok": true}',
        '{"ok": true}',
    ]


def test_an_undo_of_a_call_a_summary_covers_still_reaches_the_model(
    run_turn, editor, root, project, rojo, fake_provider
):
    """Once the oldest turns are summarised, requests send the summary in their place, not
    the call's result that an undo marks: the model was told nothing of the undo, and went
    on from the summary's word that a.txt holds its text. The system message now says so
    after the summary."""
    events = run_turn(("write_text_content", {"path": "a.txt", "text": "a\n"}))
    conversation, message = events[0].data["conversation"], events[0].data["message"]
    covered = Message.objects.filter(conversation_id=conversation).count()
    Message.objects.create(  # as compaction stores one, after the turn that needed it
        conversation_id=conversation,
        position=covered,
        role=Message.Role.SUMMARY,
        content="The assistant wrote a.txt, holding a.",
        extra={"until": covered, "summarised": covered, "from": 0},
    )
    undone = editor.post(f"/api/conversations/{conversation}/undo-turn", json={"message": message})
    assert undone.status_code == 200, undone.text
    assert tree(root) == {}

    fake_provider.add(stream(*text_chunks("There is no a.txt.")))
    editor.chat(project.pk, rojo=rojo.slug, message="What is in a.txt?", conversation=conversation)

    sent = fake_provider.requests[-1]["messages"]
    assert [m["role"] for m in sent] == ["system", "user"]
    system = sent[0]["content"]
    assert "The assistant wrote a.txt, holding a." in system
    assert system.endswith(
        "Changes the user undid afterwards, of calls the summary above covers (whatever it "
        "says, the files are as they were before each of these calls):\n"
        "- write_text_content a.txt: a.txt was put back as it was before this call."
    )


def numbered_per_response(chunks: list[dict]) -> list[dict]:
    """The chunks with each call's id as vLLM numbers them, per response: call_0, call_1..."""
    for piece in chunks:
        for n, call in enumerate(piece["choices"][0]["delta"].get("tool_calls") or ()):
            if "id" in call:
                call["id"] = f"call_{call.get('index', n)}"
    return chunks


def test_an_undo_marks_only_its_own_calls_result_when_another_branch_reused_the_id(
    editor, project, rojo, root, fake_provider
):
    """A provider that numbers calls per response gives the first call of every response the
    id call_0; an edit forks the conversation, so the new branch's call_0 does not clash with
    the old branch's on the path the model sees. Undoing the new branch's write must tell
    the model nothing about the old branch's: before, both results took the note, and back
    on the first branch the model was told a.txt was put back when it was not."""
    write_a = ("write_text_content", {"path": "a.txt", "text": "a\n"})
    write_b = ("write_text_content", {"path": "b.txt", "text": "b\n"})
    fake_provider.add(
        stream(*numbered_per_response(tool_call_chunks([write_a]))),
        stream(*text_chunks("Wrote a.txt.")),
        stream(*numbered_per_response(tool_call_chunks([write_b]))),
        stream(*text_chunks("Wrote b.txt.")),
        stream(*text_chunks("a.txt holds a.")),
    )
    first = editor.chat(project.pk, rojo=rojo.slug, message="Write a")
    conversation, asked_a = first[0].data["conversation"], first[0].data["message"]
    forked = editor.chat(
        project.pk, rojo=rojo.slug, message="Write b", conversation=conversation, replace=asked_a
    )
    asked_b = forked[0].data["message"]
    assert [r["id"] for r in results(first)] == [r["id"] for r in results(forked)] == ["call_0"]
    undone = editor.post(f"/api/conversations/{conversation}/undo-turn", json={"message": asked_b})
    assert undone.status_code == 200, undone.text
    assert tree(root) == {"a.txt": "a\n"}

    switched = editor.post(f"/api/conversations/{conversation}/branch", json={"message": asked_a})
    assert switched.status_code == 200, switched.text
    editor.chat(project.pk, rojo=rojo.slug, message="What is in a.txt?", conversation=conversation)

    sent = fake_provider.requests[-1]["messages"]
    assert [m["content"] for m in sent if m["role"] == "tool"] == ['{"ok": true}']
    marked = Message.objects.filter(conversation_id=conversation, role="tool")
    assert {m.branch: m.extra.get("undone") for m in marked} == {0: None, 1: ["b.txt"]}


def test_an_undone_result_cut_to_fit_still_says_it_was_undone(editor, project, root, fake_provider):
    """An edit's result (its diff) is often the largest text of a request, so the one cut to
    fit a small window: the note of the undo goes after the cut. Before, the cut rebuilt
    the result from the stored text and the note was lost; and an edit's arguments (texts in
    a list of objects) could not be cut at all, so the cutting never ended and the turn hung
    with its event loop busy."""
    text = "".join(f"row {n:05d} of the big ledger, with its entries\n" for n in range(1300))
    build(root, {"big.md": text})
    block = text[: len(text) // 2]
    edit = {"path": "big.md", "edits": [{"old_text": block, "new_text": block.upper()}]}
    rojo = make_rojo(fake_provider.base_url, context_window=12_000, approval_tools=[])
    fake_provider.add(
        stream(*tool_call_chunks([("edit_text_content", edit)])),
        stream(*text_chunks("Shouted the first half.")),
        stream(*text_chunks("It is as it was.")),
    )
    events = editor.chat(project.pk, rojo=rojo.slug, message="Shout")
    assert events[-1].type == "DONE" and not [e for e in events if e.type == "ERROR"]
    conversation, message = events[0].data["conversation"], events[0].data["message"]
    undone = editor.post(f"/api/conversations/{conversation}/undo-turn", json={"message": message})
    assert undone.status_code == 200, undone.text
    assert tree(root) == {"big.md": text}

    later = editor.chat(project.pk, rojo=rojo.slug, message="And now?", conversation=conversation)

    assert later[-1].type == "DONE" and not [e for e in later if e.type == "ERROR"]
    [result] = [m for m in fake_provider.requests[-1]["messages"] if m["role"] == "tool"]
    assert "to fit the context window" in result["content"]  # cut, or left out
    assert result["content"].endswith(
        "[The user undid this change afterwards: big.md was put back as it was before this call.]"
    )
    [asked] = [m for m in fake_provider.requests[-1]["messages"] if m.get("tool_calls")]
    arguments = json.loads(asked["tool_calls"][0]["function"]["arguments"])
    assert "the rest left out to fit the context window" in arguments["edits"][0]["old_text"]


# who may undo, and what the conversation shows


def test_only_members_who_may_write_can_undo(run_turn, client_for, users, root):
    events = run_turn(("write_text_content", {"path": "a.txt", "text": "a\n"}))
    [change] = changes_of(events)
    conversation, message = events[0].data["conversation"], events[0].data["message"]

    for who, status in [("viewer", 403), ("outsider", 404), (None, 401)]:
        client = client_for(users.get(who))
        assert client.post(f"/api/changes/{change}/undo").status_code == status, who
        turn = client.post(
            f"/api/conversations/{conversation}/undo-turn", json={"message": message}
        )
        assert turn.status_code == status, who

    assert (root / "a.txt").read_text() == "a\n"
    assert FileChange.objects.get().undone is None


def test_undo_of_an_unknown_change_is_404(editor):
    assert editor.post("/api/changes/999999/undo").status_code == 404
    assert editor.post(f"/api/changes/{10**20}/undo").status_code == 404


def test_conversation_detail_lists_changes_with_their_undo_time(run_turn, editor, users):
    events = run_turn(
        ("write_text_content", {"path": "a.txt", "text": "a\n"}),
        ("create_directory", {"path": "made"}),
    )
    conversation = events[0].data["conversation"]
    write, create = changes_of(events)
    assert editor.post(f"/api/changes/{create}/undo").status_code == 200

    detail = editor.get(f"/api/conversations/{conversation}").json()

    listed = {change["id"]: change for change in detail["changes"]}
    assert set(listed) == {write, create}
    calls = {
        call["id"]: (m["id"], call["function"]["name"])
        for m in detail["messages"]
        for call in m["tool_calls"] or []
    }
    for pk, tool, path in [
        (write, "write_text_content", "a.txt"),
        (create, "create_directory", "made"),
    ]:
        assert listed[pk]["tool"] == tool and listed[pk]["paths"] == [path]
        assert calls[listed[pk]["tool_call_id"]] == (listed[pk]["message_id"], tool)
    assert listed[write]["undone"] is None
    assert listed[create]["undone"] is not None
    assert FileChange.objects.get(pk=create).undone_by == users["editor"]


# rojos.changes.undo without the API


async def record(project, root: Path, snapshot: Snapshot) -> FileChange:
    """Record a change as the tool call runner does, once the files were changed."""
    return await FileChange.objects.acreate(
        project=project,
        tool="test",
        paths=snapshot.paths,
        before=snapshot.existed,
        after=digests(root, snapshot.paths),
        key=snapshot.key,
    )


async def test_change_undo_restores_a_snapshot_taken_directly(project, users, root):
    (root / "f.txt").write_text("before\n")
    snapshot = snapshot_take(project.pk, root, ["f.txt", "g.txt"])
    assert snapshot.existed == [True, False]
    (root / "f.txt").write_text("after\n")
    (root / "g.txt").write_text("created\n")
    change = await record(project, root, snapshot)

    await change_undo(change=change, user=users["owner"])

    assert tree(root) == {"f.txt": "before\n"}
    assert not snapshot.directory.exists()
    with pytest.raises(UndoRefused, match="undone already"):
        await change_undo(change=change, user=users["owner"])


async def test_an_undo_sent_twice_at_once_says_undone_already_not_changed_since(
    project, users, root
):
    """A double click: both requests loaded the change before either undid it."""
    (root / "f.txt").write_text("before\n")
    snapshot = snapshot_take(project.pk, root, ["f.txt"])
    (root / "f.txt").write_text("after\n")
    change = await record(project, root, snapshot)
    stale = await FileChange.objects.aget(pk=change.pk)

    await change_undo(change=change, user=users["owner"])
    with pytest.raises(UndoRefused) as refused:
        await change_undo(change=stale, user=users["owner"])
    done = await changes_undo(changes=[stale], user=users["owner"])

    assert str(refused.value) == "this change was undone already"
    assert done == []  # a whole turn's undo skips it
    assert tree(root) == {"f.txt": "before\n"}


async def test_changes_undo_goes_newest_first_whatever_order_it_is_given(project, users, root):
    (root / "f.txt").write_text("v0\n")
    changes = []
    for text in ("v1\n", "v2\n"):
        snapshot = snapshot_take(project.pk, root, ["f.txt"])
        (root / "f.txt").write_text(text)
        changes.append(await record(project, root, snapshot))

    done = await changes_undo(changes=changes, user=users["owner"])

    assert [c.pk for c in done] == [changes[1].pk, changes[0].pk]
    assert (root / "f.txt").read_text() == "v0\n"


# the admin's change log


def test_admin_change_log_filters_by_project_and_shows_the_paths(admin_client, project, users):
    other = project_create(name="Other", owner=users["outsider"])
    for owner, path in [(project, "docs/mine.md"), (other, "theirs.txt")]:
        FileChange.objects.create(
            project=owner,
            tool="write_text_content",
            paths=[path],
            before=[False],
            after=["file:x"],
            key=f"key-{owner.pk}",
        )
    url = reverse("admin:rojos_filechange_changelist")

    everything = admin_client.get(url).content.decode()
    filtered = admin_client.get(url, {"project__id__exact": project.pk}).content.decode()

    assert "docs/mine.md" in everything and "theirs.txt" in everything
    assert "docs/mine.md" in filtered and "theirs.txt" not in filtered


@pytest.mark.django_db(transaction=True)
async def test_undo_waits_until_the_conversations_reply_is_done(project, users):
    """While a turn runs in the conversation, its changes are not undone under it."""
    conversation = await Conversation.objects.acreate(
        project=project, turn_id=uuid.uuid4(), turn_heartbeat=timezone.now()
    )
    change = await FileChange.objects.acreate(
        project=project,
        conversation=conversation,
        tool="write_text_content",
        paths=["a.txt"],
        before=[False],
        after=[None],
        key=uuid.uuid4().hex,
    )
    with pytest.raises(UndoRefused, match="still running"):
        await change_undo(change=change, user=users["editor"])
    await change.arefresh_from_db()
    assert change.undone is None


def test_a_cut_off_change_that_cannot_be_read_does_not_stop_the_next_turn(
    editor, project, rojo, root, fake_provider, tmp_path
):
    """A record a crash left unfinished, whose path now leads out of the root."""
    fake_provider.add(stream(*text_chunks("First.")))
    conversation = editor.chat(project.pk, rojo=rojo.slug, message="Hi")[0].data["conversation"]
    change = FileChange.objects.create(
        project=project,
        conversation_id=conversation,
        tool="write_text_content",
        tool_call_id="call_cut_off",
        paths=["sub/f.txt"],
        before=[False],
        after=None,
        key=uuid.uuid4().hex,
    )
    (root / "sub").symlink_to(tmp_path, target_is_directory=True)

    fake_provider.add(stream(*text_chunks("Still here.")))
    events = editor.chat(project.pk, rojo=rojo.slug, message="Again", conversation=conversation)

    assert [e.type for e in events] == ["START", "CHAT", "DONE"]
    change.refresh_from_db()
    assert change.after is None
    response = editor.post(f"/api/changes/{change.pk}/undo")
    assert response.status_code == 400
    assert "sub/f.txt" in response.json()["detail"]


# the project's change lock


async def test_the_change_lock_runs_then_while_held_and_waits_for_the_holder(project):
    order: list[str] = []

    async def holder(entered: asyncio.Event, leave: asyncio.Event) -> None:
        async with changes_locked(project.pk, then=lambda: order.append("first")):
            entered.set()
            await leave.wait()
            order.append("first done")

    entered, leave = asyncio.Event(), asyncio.Event()
    first = asyncio.create_task(holder(entered, leave))
    await entered.wait()
    second = asyncio.create_task(_locked_value(project.pk, order))
    await asyncio.sleep(0.1)
    assert order == ["first"]  # the second waits, its `then` not run yet
    leave.set()
    await first
    assert await second == "second's value"
    assert order == ["first", "first done", "second"]


async def _locked_value(project_id: int, order: list[str]) -> str:
    def then() -> str:
        order.append("second")
        return "second's value"

    async with changes_locked(project_id, then=then) as value:
        return value


async def test_cancelled_while_taking_the_change_lock_leaves_it_free(project):
    slow = threading.Event()

    def then() -> None:
        slow.wait(5)

    taking = asyncio.create_task(_hold(project.pk, then))
    await asyncio.sleep(0.1)
    taking.cancel()
    slow.set()
    with pytest.raises(asyncio.CancelledError):
        await taking
    async with asyncio.timeout(2):
        async with changes_locked(project.pk, then=lambda: "taken") as value:
            assert value == "taken"


async def _hold(project_id: int, then) -> None:
    async with changes_locked(project_id, then=then):
        await asyncio.sleep(10)
