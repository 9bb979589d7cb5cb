"""Small builders shared by the chat tests."""

import io
from pathlib import Path

import pytest
from channels.layers import InMemoryChannelLayer
from django.core.management import call_command
from django.core.management.base import CommandError
from redis.exceptions import ConnectionError as RedisConnectionError

from roject.models import Role
from rojos.models import Message, Rojo
from rojos.tools import RojoToolContext

# The tools the test rojos get (make_rojo): a new rojo's, every built-in but delete_path
# (enabled per rojo) and update_plan. Offered, update_plan adds a tool and a part of the
# system message to every request, which the tests of other features pin; the plan's
# tests ask for it (NEW_ROJO_TOOLS).
DEFAULT_TOOLS = [
    "read_path_meta",
    "get_text_content",
    "write_text_content",
    "list_files",
    "create_directory",
    "edit_text_content",
    "move_path",
    "search_text",
]
NEW_ROJO_TOOLS = [*DEFAULT_TOOLS, "update_plan"]

STORY = (
    "Create a directory at docs/intro and write an index.page file there with a page header "
    "and a short intro paragraph."
)
PAGE = "# Introduction\n\nWelcome to the project. This page introduces what it is about.\n"


def make_rojo(base_url: str, **fields) -> Rojo:
    defaults = {
        "name": "Test rojo",
        "slug": "test-rojo",
        "base_url": base_url,
        "model": "fake-model",
        "api_key": "sk-test-secret-key-123",
        "tools": list(DEFAULT_TOOLS),
    }
    return Rojo.objects.create(**{**defaults, **fields})


def stored_history(conversation_id: int) -> list[Message]:
    return list(Message.objects.filter(conversation_id=conversation_id).order_by("position"))


def assert_history_valid(messages: list[Message]) -> None:
    """Every assistant message with tool calls is followed by one tool message per call id."""
    i = 0
    while i < len(messages):
        message = messages[i]
        if message.role == "assistant" and message.tool_calls:
            ids = [call["id"] for call in message.tool_calls]
            answers = [m.tool_call_id for m in messages[i + 1 : i + 1 + len(ids)]]
            roles = {m.role for m in messages[i + 1 : i + 1 + len(ids)]}
            assert roles == {"tool"} and sorted(answers) == sorted(ids), (
                f"calls {ids} at position {message.position} answered by {answers}"
            )
            i += len(ids)
        elif message.role == "tool":
            raise AssertionError(f"tool message at position {message.position} answers nothing")
        i += 1
    assert [m.position for m in messages] == list(range(len(messages)))


def start_with_what_it_read(conversation, *, project, user, rojo, message: str, replace=None):
    """A chat's start (the blocking service the chat calls) with `conversation` as the chat
    read it, before whatever the test did since: how a test stands in for a request that
    read, then waited while another changed the conversation."""
    import uuid

    from roject.members.access import project_access
    from rojos.turns.begin import turn_begin_blocking

    return turn_begin_blocking(
        access=project_access(user=user, project_id=project.pk),
        conversation=conversation,
        rojo=rojo,
        user=user,
        message=message,
        turn_id=uuid.uuid4(),
        limits=False,
        replace=replace,
    )


def big_text(letter: str, lines: int = 20_000) -> str:
    """Numbered lines of one letter: a file large enough that a torn write would show."""
    return "".join(f"{letter} line {n:05d}\n" for n in range(lines))


def files_in(root: Path) -> dict[str, str]:
    """Every file under the root with its text; a leftover temporary file shows up here too."""
    return {
        str(path.relative_to(root)): path.read_text() for path in root.rglob("*") if path.is_file()
    }


def context(root: Path, role: Role = Role.EDITOR, enabled=None) -> RojoToolContext:
    """A tool context on `root`; `enabled` limits the tools (None: all)."""
    return RojoToolContext(
        project_id=1,
        project_root=root,
        role=role,
        enabled=None if enabled is None else frozenset(enabled),
    )


def error_message(result) -> str:
    """The message of an {"error": ...} result; fails the test for anything else."""
    assert isinstance(result, dict)
    assert set(result) == {"error"}
    assert isinstance(result["error"], str)
    return result["error"]


class BrokenLayer(InMemoryChannelLayer):
    """A channel layer that cannot be reached (Redis down)."""

    async def group_add(self, group, channel):
        raise RedisConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    async def group_send(self, group, message):
        raise RedisConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")


def run(command: str, /, *args, **options) -> str:
    """Run a command and return what it printed on stdout."""
    out = io.StringIO()
    call_command(command, *args, stdout=out, stderr=io.StringIO(), **options)
    return out.getvalue()


def command_error(command: str, /, *args, **options) -> str:
    """Run a command that must fail and return its one-line error message."""
    with pytest.raises(CommandError) as excinfo:
        run(command, *args, **options)
    message = str(excinfo.value)
    assert message and "\n" not in message and "Traceback" not in message
    return message


def run_at_once(*calls) -> list:
    """Run each call in its own thread (its own database connection), all released at the
    same moment; each one's result, or the exception it raised, in the order given."""
    import threading

    from django.db import connection

    start = threading.Barrier(len(calls))
    outcomes: list = [None] * len(calls)

    def run(index, call):
        start.wait()
        try:
            outcomes[index] = call()
        except Exception as exc:
            outcomes[index] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=item) for item in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcomes


def audited():
    """The audit entries other than logins and logouts, which every test client's
    force_login writes too."""
    from roject.models import AuditEntry

    return AuditEntry.objects.exclude(action__in=("login", "logout"))


def sqlite_plan(sql: str, *, table: str, ways: tuple[str, ...]) -> list[str]:
    """SQLite's plan of `sql` (a captured query, its values in it), checked: no step scans
    a whole table, and each step on `table` finds its rows one of `ways` (an index's name,
    or what it searches by); the plan's steps, for further checks."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN QUERY PLAN {sql}")
        plan = [row[-1] for row in cursor.fetchall()]
    assert not [step for step in plan if step.startswith("SCAN")], plan
    searched = [step for step in plan if table in step]
    assert searched and all(any(way in step for way in ways) for step in searched), plan
    return plan
