"""`replay_conversation`: a stored conversation as its event stream, --list, and --rerun."""

import io
import json
import shutil
import socket
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from roject.models import Project
from roject.storage import project_root, scratch_copy
from rojos.agent.events import WireEvent
from rojos.conversations.replay import ReplayTurn, ScratchHistory, tool_call_differences
from rojos.models import Conversation, FileChange, Message, ModelOption, Rojo, TurnRecord
from rojos.provider.request import request_messages
from tests.support.fake_provider import http_error, stream, text_chunks, tool_call_chunks
from tests.support.helpers import PAGE, make_rojo
from tests.support.live_server import parse_sse
from tests.support.replay_story import (
    CREATE_ARGS,
    MESSAGES,
    READ_ARGS,
    REPLY_1,
    REPLY_2,
    TEXT_BEFORE,
    WRITE_ARGS,
    chat_ndjson,
    merged_chat,
    turn_1_replies,
    turn_2_replies,
)

pytestmark = pytest.mark.django_db(transaction=True)

TURN_3_REPLY = "A changelog needs a file name; shall I use CHANGELOG.md?"


@dataclass
class Run:
    out: str
    err: str
    status: int


def replay(*args, **options) -> Run:
    """Run the command; a normal return is status 0, sys.exit(n) is status n."""
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("replay_conversation", *args, stdout=out, stderr=err, **options)
        status = 0
    except SystemExit as exit_:
        status = exit_.code
    return Run(out.getvalue(), err.getvalue(), status)


def replay_error(*args, **options) -> CommandError:
    with pytest.raises(CommandError) as excinfo:
        replay(*args, **options)
    assert excinfo.value.returncode == 2
    assert "\n" not in str(excinfo.value)
    return excinfo.value


def ndjson(text: str) -> list[dict]:
    assert text.endswith("\n")
    return [json.loads(line) for line in text.splitlines()]


def by_turn(events: list[dict]) -> list[list[dict]]:
    turns: list[list[dict]] = []
    for event in events:
        if event["type"] == "START":
            turns.append([])
        turns[-1].append(event)
    return turns


def tool_events(
    call: dict, name: str, args: dict, result, *, ok: bool, place: tuple[int, int] = (0, 1)
) -> list[dict]:
    """A stored call's TOOL_CALL, with its arguments as an object, and its TOOL_RESULT.

    A call that changed files carries the id of its undo record, as it did live; one of
    several calls of a response, its place among them (`place`: index, of).
    """
    base = {"id": call["id"], "name": name}
    outcome = {"type": "TOOL_RESULT", **base, "result": result, "ok": ok}
    change = FileChange.objects.filter(tool_call_id=call["id"]).first()
    if change is not None:
        outcome["change"] = change.pk
    grouped = {} if place[1] == 1 else {"index": place[0], "of": place[1]}
    return [{"type": "TOOL_CALL", **base, "args": args, **grouped}, outcome]


def expected_events(story) -> list[list[dict]]:
    """What each stored turn produced, built from the stored messages and the live error."""
    messages = story.messages()
    create, write = messages[1].tool_calls
    (read,) = messages[6].tool_calls
    start = {"type": "START", "conversation": story.conversation.pk}
    error = story.live[2][1]["message"]
    read_error = {"error": "No such file or directory: 'notes.txt'"}
    return [
        [
            {**start, "message": messages[0].pk},
            {"type": "CHAT", "text": TEXT_BEFORE},
            *tool_events(
                create, "create_directory", CREATE_ARGS, {"ok": True}, ok=True, place=(0, 2)
            ),
            *tool_events(
                write, "write_text_content", WRITE_ARGS, {"ok": True}, ok=True, place=(1, 2)
            ),
            {"type": "CHAT", "text": REPLY_1},
            {"type": "DONE"},
        ],
        [
            {**start, "message": messages[5].pk},
            *tool_events(read, "get_text_content", READ_ARGS, read_error, ok=False),
            {"type": "CHAT", "text": REPLY_2},
            {"type": "DONE"},
        ],
        [
            {**start, "message": messages[9].pk},
            {"type": "ERROR", "message": error, "code": "provider"},
            {"type": "DONE"},
        ],
    ]


# Replaying a stored conversation


def test_story_stored_the_messages_and_turn_records_the_replay_reads(story):
    """The fixture itself: parallel calls in one message, a tool error, a provider error."""
    messages = story.messages()
    assert [m.role for m in messages] == [
        *["user", "assistant", "tool", "tool", "assistant"],
        *["user", "assistant", "tool", "assistant"],
        "user",
    ]
    assert [c["function"]["name"] for c in messages[1].tool_calls] == [
        "create_directory",
        "write_text_content",
    ]
    assert messages[1].content == TEXT_BEFORE
    assert messages[7].is_error
    records = list(TurnRecord.objects.filter(conversation=story.conversation))
    assert [(r.status, r.error_code) for r in records] == [
        ("done", ""),
        ("done", ""),
        ("error", "provider"),
    ]
    assert "answered 500" in records[2].error


def test_replay_ndjson_prints_each_turn_as_the_chat_endpoint_sent_it(story):
    run = replay(story.conversation.pk, format="ndjson")

    assert run.status == 0
    assert by_turn(ndjson(run.out)) == expected_events(story)
    assert run.err.startswith(f"# conversation {story.conversation.pk} · project demo-project")


def test_replay_ndjson_equals_the_live_chat_output_with_text_deltas_joined(story):
    """The strongest check: what `chat --format ndjson` printed, turn by turn."""
    assert any(len(turn) != len(merged_chat(turn)) for turn in story.live)  # deltas were split

    run = replay(story.conversation.pk, format="ndjson")

    assert by_turn(ndjson(run.out)) == [merged_chat(turn) for turn in story.live]


@pytest.mark.parametrize(
    ("rojo_fields", "replies", "last_types"),
    [
        (
            {},
            [stream(*text_chunks("Half an answer", pieces=3, finish=None), done=False, cut=True)],
            ["CHAT", "ERROR", "DONE"],
        ),
        (
            {},
            [
                stream(*tool_call_chunks([("create_directory", '{"path": "a"')])),
                stream(*text_chunks("Sorry, bad arguments.")),
            ],
            ["TOOL_CALL", "TOOL_RESULT", "CHAT", "DONE"],
        ),
        (
            {"max_steps": 1},
            [stream(*tool_call_chunks([("create_directory", {"path": "a"})]))],
            ["TOOL_CALL", "TOOL_RESULT", "ERROR", "DONE"],
        ),
    ],
    ids=["stream-cut-after-text", "invalid-json-arguments", "step-limit"],
)
def test_replay_equals_the_live_turn_for_other_endings(
    project, fake_provider, settings, rojo_fields, replies, last_types
):
    settings.ROJO_PROVIDER_RETRIES = 0
    make_rojo(fake_provider.base_url, **rojo_fields)
    fake_provider.add(*replies)
    live = chat_ndjson("Go.", None)

    run = replay(Conversation.objects.get().pk, format="ndjson")

    assert [e["type"] for e in merged_chat(live)][1:] == last_types
    assert ndjson(run.out) == merged_chat(live)


def test_replay_sse_numbers_the_events_of_each_turn_from_1(story):
    run = replay(story.conversation.pk, format="sse")

    assert run.status == 0
    assert run.out.startswith("id: 1\nevent: START\ndata: {")
    assert run.out.endswith("event: DONE\ndata: {}\n\n")
    events = list(parse_sse(run.out.splitlines()))
    expected = [event for turn in expected_events(story) for event in turn]
    assert [(e.type, {"type": e.type, **e.data}) for e in events] == [
        (event["type"], event) for event in expected
    ]
    assert [e.id for e in events] == [*range(1, 9), *range(1, 6), *range(1, 4)]
    blocks = run.out.split("\n\n")[:-1]
    assert all(block.count("\n") == 2 for block in blocks)
    assert "\n\nid: 1\nevent: START\ndata: " in run.out
    assert run.err.startswith("# conversation ")


def test_replay_text_shows_messages_tool_activity_and_errors(story):
    conversation = story.conversation
    error = story.live[2][1]["message"]

    run = replay(conversation.pk)

    assert run.status == 0
    assert run.err == ""
    write_args = json.dumps(WRITE_ARGS)
    assert run.out.splitlines() == [
        f"# conversation {conversation.pk} · project demo-project · rojo test-rojo · editor · "
        f"{conversation.created:%Y-%m-%d %H:%M} · {MESSAGES[0]}",
        f"> {MESSAGES[0]}",
        f"[conversation {conversation.pk}]",
        TEXT_BEFORE,
        '⚙ create_directory({"path": "docs/intro"})',
        "  → ok",
        f"⚙ write_text_content({write_args})",
        "  → ok",
        REPLY_1,
        f"> {MESSAGES[1]}",
        f"[conversation {conversation.pk}]",
        '⚙ get_text_content({"path": "notes.txt"})',
        "  → error: No such file or directory: 'notes.txt'",
        REPLY_2,
        f"> {MESSAGES[2]}",
        f"[conversation {conversation.pk}]",
        f"ERROR: {error}",
    ]
    assert "answered 500" in error


def test_replay_of_a_conversation_whose_rojo_was_deleted_still_prints_it(story):
    story.rojo.delete()

    run = replay(story.conversation.pk, format="ndjson")

    assert run.status == 0
    assert " · rojo (deleted rojo) · " in run.err
    assert by_turn(ndjson(run.out)) == expected_events(story)


def test_replay_of_an_unknown_id_is_a_one_line_error_with_status_2(db):
    error = replay_error(999999)

    assert str(error) == "no conversation 999999"


def test_replay_without_an_id_or_list_asks_for_one(db):
    error = replay_error()

    assert str(error) == "give a conversation id, or --list"


# --list


def test_list_shows_id_project_rojo_user_time_and_message_count(story):
    other_project = Project.objects.create(name="Other", slug="other")
    orphan = Conversation.objects.create(project=other_project, title="Orphaned")
    Message.objects.create(conversation=orphan, position=0, role="user", content="Hello?")
    conversation = story.conversation
    conversation.refresh_from_db()
    orphan.refresh_from_db()

    run = replay(list=True)

    assert run.status == 0
    assert run.out.splitlines() == [
        f"{orphan.pk}\tother\t(deleted rojo)\t(deleted user)\t"
        f"{orphan.updated:%Y-%m-%d %H:%M}\t1 message\tOrphaned",
        f"{conversation.pk}\tdemo-project\ttest-rojo\teditor\t"
        f"{conversation.updated:%Y-%m-%d %H:%M}\t10 messages\t{MESSAGES[0]}",
    ]


def test_list_with_project_shows_only_that_projects_conversations(story):
    other_project = Project.objects.create(name="Other", slug="other")
    Conversation.objects.create(project=other_project, title="Elsewhere")

    only_demo = replay(list=True, project="demo-project").out.splitlines()
    only_other = replay(list=True, project="other").out.splitlines()

    assert [line.split("\t")[0] for line in only_demo] == [str(story.conversation.pk)]
    assert [line.split("\t")[-1] for line in only_other] == ["Elsewhere"]


# --rerun


def files(root: Path) -> dict[str, bytes | None]:
    """Every path under root: a file's bytes, None for a directory."""
    return {
        str(path.relative_to(root)): None if path.is_dir() else path.read_bytes()
        for path in sorted(root.rglob("*"))
    }


@pytest.fixture
def real_root(story) -> Path:
    """The story's project root, without the files turn 1 wrote and with a README."""
    root = project_root(story.conversation.project_id)
    assert (root / "docs" / "intro" / "index.page").read_text() == PAGE
    shutil.rmtree(root / "docs")
    (root / "README.md").write_text("The real README.\n")
    return root


@pytest.fixture
def scratch_parent(tmp_path, monkeypatch) -> Path:
    """Where scratch copies are made, to check that none is left behind."""
    parent = tmp_path / "tmp"
    parent.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(parent))
    return parent


def script_matching_rerun(fake_provider) -> None:
    fake_provider.add(
        *turn_1_replies(), *turn_2_replies(), stream(*text_chunks(TURN_3_REPLY, pieces=2))
    )


def test_rerun_with_the_same_tool_calls_exits_0_and_leaves_the_real_files_alone(
    story, fake_provider, real_root, scratch_parent
):
    # The whole project directory: the root, and anything kept beside it.
    before = files(real_root.parent)
    messages_before = [(m.pk, m.role, m.content) for m in story.messages()]
    script_matching_rerun(fake_provider)

    run = replay(story.conversation.pk, rerun=True, format="ndjson")

    assert run.status == 0, run.err
    assert run.err.splitlines()[-1] == "same tool calls as the original (3 in 3 turns)"
    turns = by_turn(ndjson(run.out))
    assert [[e["type"] for e in turn] for turn in turns] == [
        ["START", "CHAT", "TOOL_CALL", "TOOL_RESULT", "TOOL_CALL", "TOOL_RESULT", "CHAT", "DONE"],
        ["START", "TOOL_CALL", "TOOL_RESULT", "CHAT", "DONE"],
        ["START", "CHAT", "DONE"],
    ]
    # The re-run's tools did write: in the scratch copy, which is gone now.
    write_result = turns[0][5]
    assert (write_result["name"], write_result["ok"]) == ("write_text_content", True)
    assert turns[0][0] == {"type": "START", "conversation": story.conversation.pk, "message": None}
    assert turns[2][1] == {"type": "CHAT", "text": TURN_3_REPLY}
    assert files(real_root.parent) == before
    assert not (real_root / "docs").exists()
    assert list(scratch_parent.iterdir()) == []
    # The user messages went out in order, each after the re-run's own history.
    sent = [request["messages"] for request in fake_provider.requests]
    assert len(sent) == 5
    assert sent[0] == [{"role": "user", "content": MESSAGES[0]}]
    assert [m["role"] for m in sent[1]] == ["user", "assistant", "tool", "tool"]
    assert sent[2][-1] == {"role": "user", "content": MESSAGES[1]}
    assert sent[4][-1] == {"role": "user", "content": MESSAGES[2]}
    assert [m["content"] for m in sent[4] if m["role"] == "user"] == list(MESSAGES)
    # Nothing was added to the stored conversation.
    assert [(m.pk, m.role, m.content) for m in story.messages()] == messages_before
    assert TurnRecord.objects.filter(conversation=story.conversation).count() == 3


def test_rerun_text_format_prints_the_events_and_the_summary_on_stdout(
    story, fake_provider, real_root
):
    script_matching_rerun(fake_provider)

    run = replay(story.conversation.pk, rerun=True)

    assert run.status == 0
    lines = run.out.splitlines()
    assert lines[0] == f"> {MESSAGES[0]}"
    assert '⚙ create_directory({"path": "docs/intro"})' in lines
    assert "  → error: No such file or directory: 'notes.txt'" in lines
    assert lines[-2:] == [TURN_3_REPLY, "same tool calls as the original (3 in 3 turns)"]
    assert run.err == ""


def test_rerun_with_a_different_path_exits_1_and_names_the_turn_and_both_calls(
    story, fake_provider, real_root
):
    """Turn 2 reads other files: the README copied from the project, and the page turn 1 wrote."""
    fake_provider.add(
        *turn_1_replies(),
        stream(
            *tool_call_chunks(
                [
                    ("get_text_content", {"path": "README.md"}),
                    ("get_text_content", {"path": "docs/intro/index.page"}),
                ]
            )
        ),
        stream(*text_chunks(REPLY_2)),
        stream(*text_chunks(TURN_3_REPLY)),
    )

    run = replay(story.conversation.pk, rerun=True, format="ndjson")

    assert run.status == 1
    assert run.err.splitlines()[-2:] == [
        "tool calls differ from the original:",
        '  turn 2, call 1: get_text_content({"path": "notes.txt"}) → '
        'get_text_content({"path": "README.md"})',
    ]
    results = [e for e in by_turn(ndjson(run.out))[1] if e["type"] == "TOOL_RESULT"]
    assert [(r["ok"], r["result"]) for r in results] == [
        (True, "The real README.\n"),
        (True, PAGE),
    ]
    assert not (real_root / "docs").exists()


def test_rerun_ending_in_a_provider_error_exits_2(story, fake_provider, real_root):
    fake_provider.add(*turn_1_replies(), *turn_2_replies(), http_error(500))

    run = replay(story.conversation.pk, rerun=True, format="ndjson")

    assert run.status == 2
    last_turn = by_turn(ndjson(run.out))[2]
    assert [e["type"] for e in last_turn] == ["START", "ERROR", "DONE"]
    assert last_turn[1]["code"] == "provider" and "answered 500" in last_turn[1]["message"]
    assert run.err.splitlines()[-1] == "re-run ended with an error (see ERROR above)"


def test_rerun_against_an_unreachable_provider_exits_2_with_a_clear_error(story, real_root):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    make_rojo(f"http://127.0.0.1:{port}/v1", name="Offline", slug="offline")

    run = replay(story.conversation.pk, rerun=True, rojo="offline", format="ndjson")

    assert run.status == 2
    errors = [e for e in ndjson(run.out) if e["type"] == "ERROR"]
    assert len(errors) == 3
    assert all(e["message"].startswith("Could not connect to the provider at") for e in errors)
    assert "Traceback" not in run.err


def test_rerun_with_a_rojo_whose_key_variable_breaks_the_rule_sends_nothing(
    story, fake_provider, real_root
):
    """A legacy rojo reading SECRET_KEY: refused with the key rule before any request."""
    make_rojo(fake_provider.base_url, name="Legacy", slug="legacy", api_key_env="SECRET_KEY")

    error = replay_error(story.conversation.pk, rerun=True, rojo="legacy")

    assert str(error).startswith("rojo 'legacy': 'SECRET_KEY' is not a key variable: ")
    assert "ROJO_API_KEY_ENV_ALLOWED" in str(error)
    assert fake_provider.requests == [] and fake_provider.listing_requests == []


def test_rerun_with_apply_changes_the_real_files_and_says_so(story, fake_provider, real_root):
    script_matching_rerun(fake_provider)

    run = replay(story.conversation.pk, rerun=True, apply=True, format="ndjson")

    assert run.status == 0
    assert run.err.startswith("WARNING: --apply: the tools run on the REAL files of project ")
    assert "'demo-project'" in run.err.splitlines()[0]
    assert (real_root / "docs" / "intro" / "index.page").read_text() == PAGE
    assert (real_root / "README.md").read_text() == "The real README.\n"


@pytest.mark.parametrize("yes", [False, True], ids=["denied", "approved-with-yes"])
def test_rerun_with_apply_asks_before_overwriting_and_nobody_can_answer(
    story, fake_provider, real_root, yes
):
    """The rojo's Ask-before calls wait for a person in a chat; a re-run on the real files
    has none, so they are denied unless --yes. Before, they ran."""
    Rojo.objects.filter(pk=story.conversation.rojo_id).update(approval_tools=["write_text_content"])
    overwrite = ("write_text_content", {"path": "README.md", "text": "clobbered\n"})
    fake_provider.add(
        stream(*tool_call_chunks([overwrite])),
        stream(*text_chunks("Done.")),
        stream(*text_chunks("Two.")),
        stream(*text_chunks("Three.")),
    )

    run = replay(story.conversation.pk, rerun=True, apply=True, yes=yes, format="ndjson")

    results = [e for e in ndjson(run.out) if e["type"] == "TOOL_RESULT"]
    if yes:
        assert results[0]["ok"] is True
        assert (real_root / "README.md").read_text() == "clobbered\n"
    else:
        assert results[0]["result"] == {"error": "denied by the user"}
        assert (real_root / "README.md").read_text() == "The real README.\n"


def test_rerun_with_another_rojo_sends_to_its_model(story, fake_provider, real_root):
    make_rojo(fake_provider.base_url, name="Other", slug="other-rojo", model="other-model")
    script_matching_rerun(fake_provider)

    run = replay(story.conversation.pk, rerun=True, rojo="other-rojo", format="ndjson")

    assert run.status == 0
    assert [request["model"] for request in fake_provider.requests] == ["other-model"] * 5
    story.conversation.refresh_from_db()
    assert story.conversation.rojo == story.rojo


def test_rerun_asks_the_conversations_model_and_another_rojo_its_default(
    story, fake_provider, real_root
):
    """A conversation on one of its rojo's other models is re-run on that model; on a rojo
    that does not offer it, on that rojo's default."""
    ModelOption.objects.create(rojo=story.rojo, name="picked-model")
    Conversation.objects.filter(pk=story.conversation.pk).update(model="picked-model")
    make_rojo(fake_provider.base_url, name="Other", slug="other-rojo", model="other-model")
    script_matching_rerun(fake_provider)
    script_matching_rerun(fake_provider)

    same = replay(story.conversation.pk, rerun=True, format="ndjson")
    other = replay(story.conversation.pk, rerun=True, rojo="other-rojo", format="ndjson")

    assert (same.status, other.status) == (0, 0)
    assert [request["model"] for request in fake_provider.requests] == (
        ["picked-model"] * 5 + ["other-model"] * 5
    )


def test_rerun_of_a_conversation_whose_rojo_was_deleted_needs_rojo(story, fake_provider, real_root):
    story.rojo.delete()

    error = replay_error(story.conversation.pk, rerun=True)

    assert "--rojo" in str(error)
    assert fake_provider.requests == []
    make_rojo(fake_provider.base_url, name="Stand-in", slug="stand-in", model="stand-in-model")
    script_matching_rerun(fake_provider)
    run = replay(story.conversation.pk, rerun=True, rojo="stand-in", format="ndjson")
    assert run.status == 0
    assert {request["model"] for request in fake_provider.requests} == {"stand-in-model"}


def test_rerun_with_an_unknown_rojo_is_an_error(story, fake_provider):
    error = replay_error(story.conversation.pk, rerun=True, rojo="nope")

    assert str(error) == "no rojo 'nope'"
    assert fake_provider.requests == []


# The replay module


def turn(*calls: tuple[str, dict], ids: str = "call") -> ReplayTurn:
    events = [
        WireEvent(n, "TOOL_CALL", {"id": f"{ids}_{n}", "name": name, "args": args})
        for n, (name, args) in enumerate(calls, start=1)
    ]
    return ReplayTurn(user=Message(role="user", content="hi"), events=events)


def test_tool_call_differences_ignores_call_ids_and_reports_the_first_change_per_turn():
    original = [turn(("a", {"x": 1}), ("b", {})), turn(("c", {}))]
    same = [turn(("a", {"x": 1}), ("b", {}), ids="other"), turn(("c", {}), ids="other")]
    changed_args = [turn(("a", {"x": 2}), ("z", {})), turn(("c", {}))]
    dropped_and_added = [turn(("a", {"x": 1})), turn(("c", {}), ("d", {}))]

    assert tool_call_differences(original, same) == []
    assert tool_call_differences(original, changed_args) == [
        'turn 1, call 1: a({"x": 1}) → a({"x": 2})'
    ]
    assert tool_call_differences(original, dropped_and_added) == [
        "turn 1, call 2: b({}) → (no call)",
        "turn 2, call 2: (no call) → d({})",
    ]
    assert tool_call_differences(original, original[:1]) == [
        "the re-run stopped after 1 of 2 turns"
    ]


def test_scratch_copy_holds_the_files_and_is_removed_afterwards(tmp_path):
    root = tmp_path / "root"
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "a.txt").write_text("a")
    (root / "link").symlink_to("docs/a.txt")

    with scratch_copy(root) as copy:
        assert files(copy) == files(root)
        assert (copy / "link").is_symlink()
        (copy / "docs" / "a.txt").write_text("changed")
        (copy / "new.txt").write_text("new")

    assert not copy.exists()
    assert (root / "docs" / "a.txt").read_text() == "a"
    assert not (root / "new.txt").exists()


def test_scratch_copy_of_a_project_without_files_is_an_empty_directory(tmp_path):
    with scratch_copy(tmp_path / "never-created") as copy:
        assert copy.is_dir() and list(copy.iterdir()) == []
    assert not copy.exists()


async def test_scratch_history_keeps_messages_in_memory_only(story):
    history = ScratchHistory(story.conversation, [])

    first = await history.add(role="user", content="one")
    second = await history.add(role="assistant", content="two")

    assert (first.position, second.position) == (0, 1)
    assert first.pk is None and second.pk is None
    assert request_messages(history.messages) == [
        {"role": "user", "content": "one"},
        {"role": "assistant", "content": "two"},
    ]
    assert await Message.objects.filter(conversation=story.conversation).acount() == 10
