"""The management commands: create_project, create_rojo, chat and demo."""

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.auth import authenticate, get_user_model
from django.core.management import call_command

from roject.models import Membership, Project, Role
from roject.storage import project_root
from rojos.models import Conversation, FileChange, Message, Rojo, UsageRecord
from rojos.tools import registry
from tests.conftest import make_user
from tests.support.fake_provider import http_error, stream, text_chunks, tool_call_chunks
from tests.support.helpers import (
    NEW_ROJO_TOOLS,
    PAGE,
    STORY,
    assert_history_valid,
    command_error,
    make_rojo,
    run,
    stored_history,
)

ALL_TOOLS = NEW_ROJO_TOOLS
REPLY = "I created docs/intro/index.page with a header and an intro."


# create_project


def test_create_project_prints_the_slug_and_creates_owner_members_and_root(users):
    out = run(
        "create_project",
        name="Team Docs",
        owner="owner",
        member=["editor:editor", "viewer:viewer"],
    )

    assert out == "team-docs\n"
    project = Project.objects.get(slug="team-docs")
    assert project.name == "Team Docs"
    roles = {m.user.username: m.role for m in Membership.objects.filter(project=project)}
    assert roles == {"owner": Role.OWNER, "editor": Role.EDITOR, "viewer": Role.VIEWER}
    assert project_root(project.pk).is_dir()


def test_create_project_without_members_has_only_its_owner(users):
    run("create_project", "--name", "Solo", "--owner", "outsider")

    project = Project.objects.get(slug="solo")
    assert list(project.memberships.values_list("user__username", "role")) == [
        ("outsider", "owner")
    ]


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"owner": "nobody"}, "no user 'nobody'"),
        ({"owner": "owner", "member": ["ghost:editor"]}, "no user 'ghost'"),
        ({"owner": "owner", "member": ["editor:admin"]}, "role must be one of"),
        ({"owner": "owner", "member": ["editor"]}, "role must be one of"),
    ],
    ids=["unknown-owner", "unknown-member", "bad-role", "missing-role"],
)
def test_create_project_rejects_bad_people_with_a_one_line_error(users, options, expected):
    message = command_error("create_project", name="New One", **options)

    assert expected in message
    assert not Project.objects.filter(slug="new-one").exists()


def test_create_project_bad_role_names_the_allowed_roles(users):
    message = command_error("create_project", name="X", owner="owner", member=["editor:boss"])

    assert "'editor:boss'" in message
    assert all(role in message for role in ("viewer", "editor", "owner"))


def test_create_project_refuses_a_duplicate_slug(project):
    message = command_error("create_project", name="demo project!", owner="outsider")

    assert message == "a project with slug 'demo-project' already exists"
    assert Project.objects.count() == 1


def test_create_project_refuses_a_name_without_a_slug(users, storage_dir):
    message = command_error("create_project", name="!!!", owner="owner")

    assert message == "project name '!!!' gives an empty slug"
    assert Project.objects.count() == 0
    assert list(storage_dir.iterdir()) == []


def test_create_project_error_from_the_command_line_is_one_line_on_stderr_and_exit_1():
    """A bad role is refused before touching the database, so the real CLI can be run."""
    env = {**os.environ, "DEBUG": "1", "DJANGO_SETTINGS_MODULE": "roject.settings"}
    result = subprocess.run(
        [
            sys.executable,
            "manage.py",
            "create_project",
            "--name",
            "X",
            "--owner",
            "alice",
            "--member",
            "bob:admin",
        ],
        cwd=Path(__file__).resolve().parents[2],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.strip().splitlines() == [
        "CommandError: --member 'bob:admin': role must be one of viewer, editor, owner"
    ]


# create_rojo


def test_create_rojo_prints_the_slug_and_stores_its_settings(db):
    out = run(
        "create_rojo",
        name="GPT Mini",
        base_url="https://api.openai.com/v1",
        model="gpt-4.1-mini",
        api_key_env="ROJO_KEY_OPENAI",
        tools=" list_files , get_text_content ",
        system_prompt="Be brief.",
        max_steps=5,
    )

    assert out == "gpt-mini\n"
    rojo = Rojo.objects.get(slug="gpt-mini")
    assert rojo.name == "GPT Mini"
    assert rojo.base_url == "https://api.openai.com/v1"
    assert rojo.model == "gpt-4.1-mini"
    assert rojo.api_key_env == "ROJO_KEY_OPENAI"
    assert rojo.api_key == ""
    assert rojo.tools == ["list_files", "get_text_content"]
    assert rojo.system_prompt == "Be brief."
    assert rojo.max_steps == 5


def test_create_rojo_enables_every_builtin_tool_by_default(db):
    run("create_rojo", name="Local", base_url="http://127.0.0.1:11434/v1", model="llama3.1")

    rojo = Rojo.objects.get(slug="local")
    assert rojo.tools == ALL_TOOLS
    # Everything but the destructive delete_path, which an administrator enables per rojo,
    # and read_result, which a conversation with a kept result offers to every rojo.
    assert sorted(rojo.tools) == sorted(set(registry.names()) - {"delete_path", "read_result"})
    assert rojo.max_steps == 12


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"tools": "list_files,delete_everything"}, "unknown tools: delete_everything (known:"),
        ({"base_url": "not a url"}, "--base-url: 'not a url' is not an http(s) URL"),
        ({"base_url": "ftp://example.com/v1"}, "is not an http(s) URL"),
        (
            {"base_url": "https://me:sk-secret@gateway.example.com/v1"},
            "the URL holds a user name or password, which every user of the app can see",
        ),
        (
            {"base_url": "https://gateway.example.com/v1?key=sk-secret"},
            "the URL holds a query, which every user of the app can see",
        ),
        ({"name": "***"}, "gives an empty slug"),
        ({"max_steps": 0}, "--max-steps must be at least 1"),
    ],
    ids=[
        "unknown-tool",
        "bad-url",
        "ftp-url",
        "credentials-in-url",
        "query-in-url",
        "empty-slug",
        "zero-steps",
    ],
)
def test_create_rojo_rejects_bad_input_with_a_one_line_error(db, options, expected):
    base = {"name": "New Rojo", "base_url": "https://api.example.com/v1", "model": "m"}

    message = command_error("create_rojo", **{**base, **options})

    assert expected in message
    assert "sk-secret" not in message
    assert Rojo.objects.count() == 0


def test_create_rojo_accepts_a_single_label_host(db):
    """A container's service name (no dot) is a valid base URL host."""
    run("create_rojo", name="Compose", base_url="http://ollama:11434/v1", model="llama3.1")
    assert Rojo.objects.get(slug="compose").base_url == "http://ollama:11434/v1"


def test_create_project_refuses_the_owner_as_a_member(users):
    """The owner stays owner: naming them again as a member is an error, not a demotion."""
    message = command_error("create_project", name="Solo", owner="owner", member=["owner:viewer"])
    assert "is the owner" in message
    assert not Project.objects.filter(slug="solo").exists()


def test_create_rojo_refuses_a_duplicate_slug(db):
    make_rojo("https://api.example.com/v1", name="Test Rojo", slug="test-rojo")

    message = command_error(
        "create_rojo", name="Test rojo", base_url="https://other.example.com/v1", model="m"
    )

    assert message == "a rojo with slug 'test-rojo' already exists"
    assert Rojo.objects.get().base_url == "https://api.example.com/v1"


# chat


def script_story(fake_provider) -> None:
    fake_provider.add(
        stream(*tool_call_chunks([("create_directory", {"path": "docs/intro"})])),
        stream(
            *tool_call_chunks(
                [("write_text_content", {"path": "docs/intro/index.page", "text": PAGE})]
            )
        ),
        stream(*text_chunks(REPLY, pieces=4)),
    )


def chat(*args, **options) -> str:
    return run("chat", *args, project="demo-project", rojo="test-rojo", user="editor", **options)


@pytest.mark.django_db(transaction=True)
def test_chat_ndjson_prints_exactly_the_turn_events_and_writes_the_file(project, fake_provider):
    make_rojo(fake_provider.base_url)
    script_story(fake_provider)

    out = chat(STORY, format="ndjson")

    lines = out.splitlines()
    assert out.endswith("\n") and all(lines)
    events = [json.loads(line) for line in lines]
    assert [e["type"] for e in events] == [
        "START",
        "TOOL_CALL",
        "TOOL_RESULT",
        "TOOL_CALL",
        "TOOL_RESULT",
        *["CHAT"] * 4,
        "DONE",
    ]
    start, create_call, create_result, write_call, write_result = events[:5]
    assert (create_call["name"], create_call["args"]) == (
        "create_directory",
        {"path": "docs/intro"},
    )
    assert create_result == {
        "type": "TOOL_RESULT",
        "id": create_call["id"],
        "name": "create_directory",
        "result": {"ok": True},
        "ok": True,
        "change": FileChange.objects.get(tool_call_id=create_call["id"]).pk,
    }
    assert write_call["args"] == {"path": "docs/intro/index.page", "text": PAGE}
    assert write_result["ok"] is True
    assert "".join(e["text"] for e in events if e["type"] == "CHAT") == REPLY
    assert events[-1] == {"type": "DONE"}

    page = project_root(project.pk) / "docs" / "intro" / "index.page"
    assert page.read_text() == PAGE
    conversation = Conversation.objects.get()
    assert start == {"type": "START", "conversation": conversation.pk, "message": start["message"]}
    assert conversation.project == project and conversation.user.username == "editor"
    assert conversation.turn_id is None
    history = stored_history(conversation.pk)
    assert [m.role for m in history] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]
    assert history[0].pk == start["message"] and history[-1].content == REPLY
    assert_history_valid(history)


@pytest.mark.django_db(transaction=True)
def test_chat_text_prints_readable_tool_lines_and_the_reply(project, fake_provider):
    make_rojo(fake_provider.base_url)
    script_story(fake_provider)

    out = chat(STORY)

    conversation = Conversation.objects.get()
    lines = out.splitlines()
    assert lines[0] == f"[conversation {conversation.pk}]"
    assert lines[1] == '⚙ create_directory({"path": "docs/intro"})'
    assert lines[2] == "  → ok"
    assert lines[3].startswith('⚙ write_text_content({"path": "docs/intro/index.page"')
    assert lines[4] == "  → ok"
    assert lines[5:] == [REPLY]
    assert out.endswith(REPLY + "\n")


@pytest.mark.django_db(transaction=True)
def test_chat_text_shows_a_failed_tool_call_with_its_error(project, fake_provider):
    make_rojo(fake_provider.base_url)
    fake_provider.add(
        stream(*tool_call_chunks([("get_text_content", {"path": "missing.txt"})])),
        stream(*text_chunks("That file does not exist.")),
    )

    out = chat("Read missing.txt")

    lines = out.splitlines()
    assert lines[1] == '⚙ get_text_content({"path": "missing.txt"})'
    assert lines[2].startswith("  → error: ") and "missing.txt" in lines[2]
    assert lines[3] == "That file does not exist."


@pytest.mark.django_db(transaction=True)
def test_chat_exits_1_when_the_turn_ends_with_an_error(project, fake_provider, settings):
    settings.ROJO_PROVIDER_RETRIES = 0
    make_rojo(fake_provider.base_url)
    fake_provider.add(http_error(401))
    out = io.StringIO()

    with pytest.raises(SystemExit) as excinfo:
        call_command(
            "chat",
            "Hello",
            project="demo-project",
            rojo="test-rojo",
            user="editor",
            format="ndjson",
            stdout=out,
        )

    assert excinfo.value.code == 1
    events = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [e["type"] for e in events] == ["START", "ERROR", "DONE"]
    assert events[1]["code"] == "provider"
    assert "sk-test-secret-key-123" not in out.getvalue()
    assert len(fake_provider.requests) == 1
    assert Conversation.objects.get().turn_id is None


@pytest.mark.django_db(transaction=True)
def test_chat_text_prints_the_error_line_and_exits_1(project, fake_provider, settings):
    settings.ROJO_PROVIDER_RETRIES = 0
    make_rojo(fake_provider.base_url)
    fake_provider.add(http_error(401))
    out = io.StringIO()

    with pytest.raises(SystemExit) as excinfo:
        call_command(
            "chat", "Hello", project="demo-project", rojo="test-rojo", user="editor", stdout=out
        )

    assert excinfo.value.code == 1
    assert any(line.startswith("ERROR: ") for line in out.getvalue().splitlines())


@pytest.mark.django_db(transaction=True)
def test_chat_conversation_option_continues_an_existing_conversation(project, fake_provider):
    make_rojo(fake_provider.base_url)
    fake_provider.add(stream(*text_chunks("Hello.")), stream(*text_chunks("Again.")))

    chat("Hi", format="ndjson")
    conversation = Conversation.objects.get()
    out = chat("Once more", format="ndjson", conversation=conversation.pk)

    assert json.loads(out.splitlines()[0])["conversation"] == conversation.pk
    assert Conversation.objects.count() == 1
    assert [m["content"] for m in fake_provider.requests[1]["messages"]] == [
        "Hi",
        "Hello.",
        "Once more",
    ]
    assert [m.role for m in stored_history(conversation.pk)] == ["user", "assistant"] * 2


@pytest.mark.django_db(transaction=True)
def test_chat_refuses_a_conversation_of_another_project(project, users, fake_provider):
    rojo = make_rojo(fake_provider.base_url)
    other = Project.objects.create(name="Other", slug="other")
    foreign = Conversation.objects.create(project=other, rojo=rojo, user=users["owner"])

    message = command_error(
        "chat",
        "Hi",
        project="demo-project",
        rojo="test-rojo",
        user="editor",
        conversation=foreign.pk,
    )

    assert "no conversation" in message
    assert Message.objects.count() == 0
    assert fake_provider.requests == []


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("names", "expected"),
    [
        ({"project": "nope"}, "Project not found"),
        ({"rojo": "nope"}, "Rojo not found"),
        ({"user": "nope"}, "User not found"),
    ],
    ids=["project", "rojo", "user"],
)
def test_chat_refuses_unknown_names(project, fake_provider, names, expected):
    make_rojo(fake_provider.base_url)
    options = {"project": "demo-project", "rojo": "test-rojo", "user": "editor", **names}

    message = command_error("chat", "Hi", **options)

    assert message == expected
    assert Conversation.objects.count() == 0
    assert fake_provider.requests == []


@pytest.mark.django_db(transaction=True)
def test_chat_refuses_a_user_who_is_not_a_member_and_stores_nothing(project, fake_provider):
    make_rojo(fake_provider.base_url)

    message = command_error("chat", "Hi", project="demo-project", rojo="test-rojo", user="outsider")

    assert message == "No such project."
    assert Conversation.objects.count() == 0
    assert Message.objects.count() == 0
    assert fake_provider.requests == []


# demo


def login_password(out: str) -> str:
    match = re.search(r"log in as demo / (\S+)\n", out)
    assert match, out
    return match.group(1)


def test_demo_creates_a_staff_user_a_project_and_a_rojo_from_the_environment(db, monkeypatch):
    monkeypatch.setenv("ROJO_BASE_URL", "https://api.example.com/v1")
    monkeypatch.setenv("ROJO_MODEL", "example-model")
    monkeypatch.setenv("ROJO_API_KEY", "sk-demo-secret-from-env")

    out = run("demo", host="localhost", port="9000")

    user = get_user_model().objects.get(username="demo")
    assert user.is_staff
    assert authenticate(username="demo", password=login_password(out)) == user
    assert "http://localhost:9000/" in out
    assert "sk-demo-secret-from-env" not in out
    project = Project.objects.get(slug="demo")
    assert Membership.objects.get(project=project, user=user).role == Role.OWNER
    assert project_root(project.pk).is_dir()
    rojo = Rojo.objects.get(slug="demo")
    assert (rojo.base_url, rojo.model) == ("https://api.example.com/v1", "example-model")
    assert rojo.api_key_env == "ROJO_API_KEY"
    assert rojo.api_key == ""
    assert rojo.resolved_api_key() == "sk-demo-secret-from-env"
    assert rojo.tools == ALL_TOOLS


def test_demo_defaults_to_a_local_ollama(db, monkeypatch):
    monkeypatch.delenv("ROJO_BASE_URL", raising=False)
    monkeypatch.delenv("ROJO_MODEL", raising=False)

    out = run("demo")

    rojo = Rojo.objects.get(slug="demo")
    assert (rojo.base_url, rojo.model) == ("http://127.0.0.1:11434/v1", "llama3.1")
    assert "http://127.0.0.1:8000/" in out


def test_demo_on_any_address_prints_a_url_the_server_answers(db, settings):
    """make run HOST=0.0.0.0 printed http://0.0.0.0:8000/, a Host ALLOWED_HOSTS refuses (400)."""
    settings.ALLOWED_HOSTS = ["127.0.0.1", "localhost"]

    out = run("demo", host="0.0.0.0", port="8001")

    assert "Open http://127.0.0.1:8001/ and log in" in out
    assert "From another machine, open this one's name or address, once ALLOWED_HOSTS" in out


def test_demo_refuses_a_host_the_server_would_answer_with_400(db, settings):
    """A HOST outside ALLOWED_HOSTS: said before anything is made, with the variable to set."""
    settings.ALLOWED_HOSTS = ["127.0.0.1", "localhost"]

    message = command_error("demo", host="chat.lan", port="8000")

    assert message == (
        "'chat.lan' (make run's HOST) is not in ALLOWED_HOSTS, so the server would answer "
        "http://chat.lan:8000/ with 400 Bad Request: set ALLOWED_HOSTS=chat.lan as well."
    )
    assert not Rojo.objects.exists()
    settings.ALLOWED_HOSTS = ["chat.lan"]
    assert "Open http://chat.lan:8000/" in run("demo", host="chat.lan", port="8000")


def test_demo_says_which_variable_it_reads_when_another_tools_is_set(db, monkeypatch):
    """OPENAI_API_KEY set for the demo rojo, which reads ROJO_API_KEY: its first chat failed
    with a refused key; the run says so before, naming both and never the value."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-secret")
    monkeypatch.delenv("ROJO_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_MODEL", "gpt-4.1-mini")
    monkeypatch.setenv("ROJO_MODEL", "gpt-4.1-mini")
    err = io.StringIO()

    call_command("demo", stdout=io.StringIO(), stderr=err)

    assert err.getvalue().splitlines() == [
        "Note: OPENAI_API_KEY is set, but the demo rojo reads ROJO_API_KEY, which is not: "
        "ROJO_API_KEY=$OPENAI_API_KEY make run."
    ]


def test_demo_refuses_a_base_url_without_a_scheme_in_one_line(db, monkeypatch):
    monkeypatch.setenv("ROJO_BASE_URL", "localhost:11434/v1")

    message = command_error("demo")

    assert message == (
        "ROJO_BASE_URL: 'localhost:11434/v1' is not an http(s) URL such as "
        "https://api.openai.com/v1"
    )
    assert not Rojo.objects.exists() and not Project.objects.filter(slug="demo").exists()


def test_demo_twice_changes_the_password_and_duplicates_nothing(db, monkeypatch):
    monkeypatch.setenv("ROJO_MODEL", "first-model")
    first = login_password(run("demo"))
    monkeypatch.setenv("ROJO_MODEL", "second-model")
    second = login_password(run("demo"))

    assert first != second
    assert authenticate(username="demo", password=first) is None
    assert authenticate(username="demo", password=second) is not None
    assert get_user_model().objects.filter(username="demo").count() == 1
    assert Project.objects.filter(slug="demo").count() == 1
    assert Membership.objects.count() == 1
    assert Rojo.objects.get(slug="demo").model == "second-model"


def test_demo_keeps_other_users_and_projects(project):
    run("demo")

    assert Project.objects.count() == 2
    assert project.memberships.count() == 3
    assert get_user_model().objects.count() == 5


def test_demo_refreshes_a_user_that_already_exists(db):
    make_user("demo")

    password = login_password(run("demo"))

    user = authenticate(username="demo", password=password)
    assert user is not None and user.is_staff


def test_demo_makes_a_recreated_demo_user_the_owner_of_the_existing_demo_project(db):
    """Deleting the demo user drops its membership; the next run must give it back."""
    run("demo")
    get_user_model().objects.get(username="demo").delete()

    run("demo")

    user = get_user_model().objects.get(username="demo")
    project = Project.objects.get(slug="demo")
    assert Membership.objects.get(project=project, user=user).role == Role.OWNER


@pytest.mark.parametrize(
    ("command", "options", "expected"),
    [
        (
            "create_project",
            {"name": "x" * 250, "owner": "owner"},
            "name: Ensure this value has at most 200 characters (it has 250).",
        ),
        (
            "create_rojo",
            {"name": "Long", "base_url": "https://api.example.com/v1", "model": "m" * 250},
            "model: Ensure this value has at most 200 characters (it has 250).",
        ),
    ],
    ids=["project-name", "rojo-model"],
)
def test_a_value_too_long_is_a_one_line_error_on_every_database(
    db, users, command, options, expected
):
    """PostgreSQL refuses what SQLite would have stored: before, a DataError traceback."""
    message = command_error(command, **options)

    assert expected in message
    assert not Project.objects.filter(name="x" * 250).exists()
    assert not Rojo.objects.filter(slug="long").exists()


@pytest.mark.django_db(transaction=True)
def test_chat_over_the_projects_budget_says_so_without_a_traceback(
    project, users, fake_provider, settings
):
    """A project over its daily budget: a command error naming the budget, no model call."""
    make_rojo(fake_provider.base_url)
    settings.ROJO_PROJECT_DAILY_TOKENS = 10
    UsageRecord.objects.create(user=users["owner"], project=project, prompt_tokens=10)

    message = command_error("chat", "Hi", project="demo-project", rojo="test-rojo", user="editor")

    assert "daily budget of 10 tokens" in message
    assert fake_provider.requests == []
