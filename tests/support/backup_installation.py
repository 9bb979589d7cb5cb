"""An installation with a bit of everything a backup must carry, for the backup tests.

Users in a group with a permission, an OIDC identity, tokens (one read-only), an MCP server
with a person's sealed account (bytes), three projects with nested files (a binary, an
executable, a private file, a link), people's changes with
their undo copies (a write over a file, a deletion), a conversation with tool calls, a
branch, a summary, usage and an approval waiting, a hard-deleted conversation, audit entries,
and a timestamp whose microseconds a millisecond cut would lose.
"""

import datetime
import os
from dataclasses import dataclass

from asgiref.sync import async_to_sync
from django.contrib.auth.models import Group, Permission
from django.utils import timezone

from roject.audit.log import AuditAction, AuditActor, audit_record
from roject.identity.tokens import api_token_create
from roject.members.projects import project_create
from roject.models import OidcIdentity, Role
from roject.storage import project_root
from rojos.changes.ledger import file_tool_run
from rojos.models import (
    Conversation,
    FileChange,
    McpAccount,
    Message,
    PendingApproval,
    RojoMcpServer,
    TurnRecord,
)
from rojos.models.usage import UsageRecord
from tests.support.helpers import make_rojo
from tests.support.mcp_helpers import time_server

# A time a millisecond cut changes (the issue's own example).
EXACT = datetime.datetime(2026, 12, 5, 0, 48, 18, 161688, tzinfo=datetime.UTC)
BINARY = bytes(range(256)) * 64
CONVERSATIONS = 50  # the one with a branch, a summary and an approval, and the rest
SEALED = bytes(range(255, -1, -1)) + b"\x00sealed"  # a BinaryField's bytes, NULs included


@dataclass
class Installation:
    projects: list
    conversation: Conversation
    change: FileChange  # a person's write over a file: its undo copy is the old text
    secret: str  # the editor's token
    gone_conversation: int  # the id of a conversation deleted
    search_words: list[str]


def _write(project, user, path: str, text: str) -> FileChange:
    _, change = async_to_sync(file_tool_run)(
        project_id=project.pk,
        user=user,
        tool_name="write_text_content",
        args={"path": path, "text": text},
    )
    return change


def installation_build(users: dict, project) -> Installation:
    """Fill the test's database and storage (`users` and `project`: the shared fixtures')."""
    owner, editor = users["owner"], users["editor"]
    group = Group.objects.create(name="reviewers")
    group.permissions.add(Permission.objects.get(codename="view_project"))
    owner.groups.add(group)
    OidcIdentity.objects.create(user=editor, issuer="https://id.example", subject="sub-editor")
    projects = [
        project,
        project_create(name="Second", owner=owner, members={editor: Role.EDITOR}),
        project_create(name="Third", owner=editor),
    ]
    for number, each in enumerate(projects):
        root = project_root(each.pk)
        (root / "docs" / "deep" / "deeper").mkdir(parents=True)
        (root / "docs" / "deep" / "deeper" / f"notes-{number}.md").write_text(f"notes {number}\n")
        (root / "data.bin").write_bytes(BINARY)
        script = root / "run.sh"
        script.write_text("#!/bin/sh\necho hi\n")
        script.chmod(0o755)
        private = root / "docs" / "private.txt"
        private.write_text("private\n")
        private.chmod(0o600)
        os.symlink("docs/deep", root / "shortcut")
    change = _write(projects[0], editor, "docs/plan.md", "first plan\n")
    change = _write(projects[0], editor, "docs/plan.md", "second plan\n")
    _write(projects[1], editor, "src/app/main.py", "print('hello')\n")
    async_to_sync(file_tool_run)(
        project_id=projects[1].pk,
        user=editor,
        tool_name="delete_path",
        args={"path": "src/app/main.py"},
        audited=(AuditAction.FILE_DELETED, AuditActor(user=editor)),
    )
    rojo = make_rojo("http://127.0.0.1:9")
    server = time_server()
    RojoMcpServer.objects.create(rojo=rojo, server=server)
    McpAccount.objects.create(server=server, user=editor, tokens=SEALED, client=b"")
    conversation = _conversation(projects[0], editor, rojo)
    for number in range(1, CONVERSATIONS):
        _conversation_small(projects[number % 3], editor, rojo, number)
    gone = Conversation.objects.create(project=projects[2], user=editor, title="to be deleted")
    Message.objects.create(conversation=gone, position=0, role="user", content="gone soon")
    gone_id = gone.pk
    gone.delete()  # a hard deletion: its ids are never handed out again
    secret = api_token_create(user=editor, name="laptop").secret
    api_token_create(user=users["viewer"], name="reader", read_only=True)
    audit_record(
        action=AuditAction.PROJECT_CHANGED,
        actor=AuditActor(user=owner),
        project=projects[2],
        obj=projects[2],
        details={"note": "é ✓", "n": 1.5},
    )
    return Installation(
        projects=projects,
        conversation=conversation,
        change=change,
        secret=secret,
        gone_conversation=gone_id,
        search_words=["kangaroo", "wombat", "budget"],
    )


def _conversation_small(project, user, rojo, number: int) -> None:
    """One of the installation's many: a question, a tool call, its result and the answer,
    with the answer's usage."""
    conversation = Conversation.objects.create(
        project=project, user=user, rojo=rojo, title=f"Question {number}"
    )
    call = {"id": f"call-{number}", "type": "function"}
    call["function"] = {"name": "list_files", "arguments": '{"path": "docs"}'}
    rows = [
        ("user", {"content": f"What is in docs, number {number}?"}),
        ("assistant", {"content": None, "tool_calls": [call]}),
        ("tool", {"content": "deep/", "tool_call_id": call["id"], "name": "list_files"}),
        ("assistant", {"content": f"A folder, deep ({number})."}),
    ]
    messages = [
        Message.objects.create(conversation=conversation, position=n, role=role, **fields)
        for n, (role, fields) in enumerate(rows)
    ]
    UsageRecord.objects.create(
        user=user,
        project=project,
        rojo=rojo,
        conversation=conversation,
        message=messages[-1],
        prompt_tokens=40 + number,
        completion_tokens=number,
    )


def _conversation(project, user, rojo) -> Conversation:
    conversation = Conversation.objects.create(
        project=project, user=user, rojo=rojo, title="Kangaroo budget"
    )
    call = {"id": "call-1", "type": "function"}
    call["function"] = {"name": "get_text_content", "arguments": '{"path": "docs/plan.md"}'}
    rows = [
        ("user", {"content": "Where is the wombat plan?"}),
        ("assistant", {"content": None, "tool_calls": [call]}),
        (
            "tool",
            {"content": "second plan\n", "tool_call_id": "call-1", "name": "get_text_content"},
        ),
        ("assistant", {"content": "The wombat plan is in docs/plan.md.", "usage": {"t": 12}}),
        ("summary", {"content": "They looked for the plan.", "extra": {"until": 4}}),
        ("user", {"content": "And the kangaroo budget?"}),
    ]
    messages = [
        Message.objects.create(conversation=conversation, position=n, role=role, **fields)
        for n, (role, fields) in enumerate(rows)
    ]
    # A branch: the last question asked again, answered differently.
    again = Message.objects.create(
        conversation=conversation, position=5, branch=1, role="user", content="Budget, please?"
    )
    Message.objects.create(
        conversation=conversation, position=6, branch=1, role="assistant", content="Budget: 3."
    )
    conversation.branches = [
        {"id": 1, "parent": 0, "at": 5, "after": messages[4].pk, "first": again.pk,
         "replaced": messages[5].pk}
    ]  # fmt: skip
    conversation.branch = 1
    conversation.save(update_fields=["branches", "branch"])
    Message.objects.filter(pk=messages[0].pk).update(created=EXACT)
    TurnRecord.objects.create(
        conversation=conversation,
        user_message=messages[0],
        rojo=rojo,
        user=user,
        status=TurnRecord.Status.DONE,
        finished=timezone.now(),
    )
    UsageRecord.objects.create(
        user=user,
        project=project,
        rojo=rojo,
        conversation=conversation,
        message=messages[3],
        prompt_tokens=120,
        completion_tokens=30,
        cost="0.000123",
    )
    PendingApproval.objects.create(
        project=project,
        conversation=conversation,
        user=user,
        call_id="call-2",
        tool="delete_path",
        path="docs/plan.md",
        preview={"diff": "-x"},
        expires=timezone.now() + datetime.timedelta(hours=1),
    )
    return conversation
