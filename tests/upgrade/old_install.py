"""What an install of the previous release holds, written through that release's models.

`apps` is the migration state's registry: each model as the release's migrations left it, so
a field added since cannot be set here by mistake, and no method of today's classes runs.
Secrets are made as the release made them (an API token's SHA-256 digest, an invitation's
signed link), so today's code must still accept what was handed out then.
"""

import hashlib
import uuid
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal

from django.conf import settings
from django.contrib.auth.hashers import make_password
from django.core import signing
from django.utils import timezone

# How the release made its secrets (roject/tokens.py and roject/invitations.py then).
TOKEN = "rojo_" + "Otter0Watch1Token2For3The4Upgrade5Test6X"  # 40 characters after the prefix
REVOKED_TOKEN = "rojo_" + "Revoked0Token1For2The3Upgrade4Test5Abcd6"
_INVITATION_SALT = "roject.invitations"


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def _link(secret: str) -> str:
    return signing.TimestampSigner(salt=_INVITATION_SALT).sign(secret)


@dataclass(frozen=True, kw_only=True)
class OldInstall:
    """The ids and handed-out secrets of the old install's rows that the checks look at."""

    owner: int
    editor: int
    viewer: int
    project: int
    rojo: int
    mcp_server: int
    chat: int  # two turns: a tool call with its change, then a summary; usage throughout
    forked: int  # an edited first message: branch 1 active, branch 0 kept
    crashed: int  # a reply a crash cut off, left as a draft
    draft: int  # that draft message
    changes: dict[str, int]  # by kind: "rojo", "upload", "unfinished"
    invitation: str  # the link of a pending invitation
    used_invitation: str  # the link of one accepted already


def old_install_fill(apps) -> OldInstall:
    """Write the old install's rows with the historical models of `apps`."""
    users = _users(apps)
    project = _project(apps, users)
    rojo, server = _rojo_and_mcp_server(apps)
    chat, changes = _chat(apps, project, rojo, users["editor"])
    forked = _forked(apps, project, rojo, users["owner"])
    crashed, draft = _crashed(apps, project, rojo, users["editor"])
    invitations = _invitations(apps, project, users)
    _tokens(apps, project, users)
    _audit(apps, project, users)
    return OldInstall(
        owner=users["owner"].pk,
        editor=users["editor"].pk,
        viewer=users["viewer"].pk,
        project=project.pk,
        rojo=rojo.pk,
        mcp_server=server.pk,
        chat=chat.pk,
        forked=forked.pk,
        crashed=crashed.pk,
        draft=draft.pk,
        changes=changes,
        invitation=invitations[0],
        used_invitation=invitations[1],
    )


def _users(apps) -> dict:
    User = apps.get_model(settings.AUTH_USER_MODEL)
    return {
        name: User.objects.create(
            username=name, email=f"{name}@example.com", password=make_password("pw-" + name)
        )
        for name in ("owner", "editor", "viewer", "outsider")
    }


def _project(apps, users):
    Project = apps.get_model("roject", "Project")
    Membership = apps.get_model("roject", "Membership")
    project = Project.objects.create(name="Otter Watch", slug="otter-watch", owner_approval=True)
    for name, role, source in (
        ("owner", "owner", ""),
        ("editor", "editor", ""),
        ("viewer", "viewer", "oidc"),
    ):
        Membership.objects.create(user=users[name], project=project, role=role, source=source)
    apps.get_model("roject", "MembershipRemoval").objects.create(
        user=users["outsider"], project=project
    )
    apps.get_model("roject", "OidcIdentity").objects.create(
        user=users["viewer"], issuer="https://sso.example.com", subject="viewer-sub"
    )
    apps.get_model("rojos", "UsageBudget").objects.create(
        project=project, period="day", max_tokens=100_000
    )
    return project


def _rojo_and_mcp_server(apps):
    rojo = apps.get_model("rojos", "Rojo").objects.create(
        name="Scout",
        slug="scout",
        base_url="http://127.0.0.1:9/v1",
        model="fake-model",
        api_key_env="OPENAI_API_KEY",  # allowed then; the key rule of 0.2.0 refuses it
        system_prompt="You count animals.",
        tools=["get_text_content", "write_text_content"],
        approval_tools=["write_text_content"],
        context_window=16_384,
        price_input=Decimal("0.4000"),
        price_output=Decimal("1.6000"),
        chars_per_token=3.5,
        stream_usage_refused=True,
    )
    server = apps.get_model("rojos", "McpServer").objects.create(
        name="Clock",
        slug="clock",
        transport="stdio",
        command="uvx",
        args=["mcp-server-time"],
        env={"TZ": "UTC"},
        env_from={"CLOCK_KEY": "ROJO_CLOCK_KEY"},
        listed_tools=[{"name": "get_current_time", "annotations": {"readOnlyHint": True}}],
        listed_at=timezone.now(),
    )
    apps.get_model("rojos", "RojoMcpServer").objects.create(
        rojo=rojo, server=server, tools=["get_current_time"], ask_before=True
    )
    return rojo, server


def _messages(apps, conversation, rows: list[dict]) -> list:
    Message = apps.get_model("rojos", "Message")
    return [
        Message.objects.create(conversation=conversation, position=position, **row)
        for position, row in enumerate(rows)
    ]


_CALL = {
    "id": "call_1",
    "type": "function",
    "function": {
        "name": "write_text_content",
        "arguments": '{"path": "otters.md", "content": "# Otters\\n\\nSeven.\\n"}',
    },
}


def _chat(apps, project, rojo, editor):
    """Two turns: a file written by a tool call, then a summary of the first turn."""
    conversation = apps.get_model("rojos", "Conversation").objects.create(
        project=project,
        rojo=rojo,
        user=editor,
        title="Otters in the river",
        pinned=True,
        allowed_tools=["write_text_content"],
    )
    usage = {"prompt_tokens": 900, "completion_tokens": 40, "total_tokens": 940}
    messages = _messages(
        apps,
        conversation,
        [
            {"role": "user", "content": "How many otters live in the river?"},
            {"role": "assistant", "content": None, "tool_calls": [_CALL], "usage": usage},
            {
                "role": "tool",
                "content": '{"path": "otters.md", "bytes": 18}',
                "tool_call_id": "call_1",
                "name": "write_text_content",
            },
            {"role": "assistant", "content": "Seven otters, noted in otters.md.", "usage": usage},
            {"role": "user", "content": "And the beavers upstream?"},
            {
                "role": "summary",
                "content": "The editor counted seven otters and noted them in otters.md.",
                "extra": {"until": 4, "summarised": 4, "from": 0},
            },
            {"role": "assistant", "content": "No beaver was counted upstream.", "usage": usage},
        ],
    )
    TurnRecord = apps.get_model("rojos", "TurnRecord")
    for user_message in (messages[0], messages[4]):
        TurnRecord.objects.create(
            conversation=conversation,
            user_message=user_message,
            rojo=rojo,
            user=editor,
            status="done",
            finished=timezone.now(),
        )
    _usage(apps, project, rojo, editor, conversation, messages)
    return conversation, _changes(apps, project, conversation, messages[1])


def _usage(apps, project, rojo, user, conversation, messages) -> None:
    UsageRecord = apps.get_model("rojos", "UsageRecord")
    for message, kind, prompt, completion, cost in (
        (messages[1], "reply", 900, 40, "0.00042400"),
        (messages[3], "reply", 960, 12, "0.00040320"),
        (messages[5], "summary", 700, 30, "0.00032800"),
        (messages[6], "reply", 400, 9, "0.00017440"),
    ):
        UsageRecord.objects.create(
            user=user,
            project=project,
            rojo=rojo,
            conversation=conversation,
            message=message,
            kind=kind,
            prompt_tokens=prompt,
            completion_tokens=completion,
            cached_tokens=100,
            reported=kind == "reply",
            cost=Decimal(cost),
        )


def _changes(apps, project, conversation, call_message) -> dict[str, int]:
    """A rojo's change (no author: older rows are the conversation user's), a person's
    upload, and a change a crash cut off before its record was finished."""
    FileChange = apps.get_model("rojos", "FileChange")
    User = apps.get_model(settings.AUTH_USER_MODEL)
    rojo = FileChange.objects.create(
        project=project,
        conversation=conversation,
        message=call_message,
        tool_call_id="call_1",
        origin="rojo",
        tool="write_text_content",
        paths=["otters.md"],
        before=[False],
        after=["sha256:otters-v1"],
        diffs=["--- a/otters.md\n+++ b/otters.md\n@@ -0,0 +1,3 @@\n+# Otters\n+\n+Seven.\n"],
        key="change-rojo",
    )
    upload = FileChange.objects.create(
        project=project,
        author=User.objects.get(username="owner"),
        origin="upload",
        tool="upload",
        paths=["map.png"],
        before=[False],
        after=["sha256:map"],
        key="change-upload",
    )
    unfinished = FileChange.objects.create(
        project=project,
        author=User.objects.get(username="editor"),
        origin="person",
        tool="write_text_content",
        paths=["otters.md"],
        before=[True],
        after=None,
        key="change-unfinished",
    )
    return {"rojo": rojo.pk, "upload": upload.pk, "unfinished": unfinished.pk}


def _forked(apps, project, rojo, owner):
    """The first message edited: branch 1 is active, branch 0 keeps the original."""
    conversation = apps.get_model("rojos", "Conversation").objects.create(
        project=project, rojo=rojo, user=owner, title="Beavers"
    )
    original = _messages(
        apps,
        conversation,
        [
            {"role": "user", "content": "Tell me about beavers"},
            {"role": "assistant", "content": "Beavers build dams."},
        ],
    )
    Message = apps.get_model("rojos", "Message")
    edited = Message.objects.create(
        conversation=conversation,
        branch=1,
        position=0,
        role="user",
        content="Tell me about badgers",
    )
    Message.objects.create(
        conversation=conversation,
        branch=1,
        position=1,
        role="assistant",
        content="Badgers dig setts.",
    )
    conversation.branch = 1
    conversation.branches = [
        {
            "id": 1,
            "parent": 0,
            "at": 0,
            "after": None,
            "first": edited.pk,
            "replaced": original[0].pk,
        }
    ]
    conversation.save(update_fields=["branch", "branches"])
    return conversation


def _crashed(apps, project, rojo, editor):
    """A reply cut off by a crash of its server: the claim left behind (its heartbeat long
    stale), the turn still recorded as running, the text so far a draft."""
    conversation = apps.get_model("rojos", "Conversation").objects.create(
        project=project,
        rojo=rojo,
        user=editor,
        title="A long poem",
        turn_id=uuid.uuid4(),
        turn_heartbeat=timezone.now() - timedelta(days=1),
    )
    question, draft = _messages(
        apps,
        conversation,
        [
            {"role": "user", "content": "Write a long poem about herons"},
            {"role": "assistant", "content": "Grey herons stand in shallow water", "draft": True},
        ],
    )
    apps.get_model("rojos", "TurnRecord").objects.create(
        conversation=conversation, user_message=question, rojo=rojo, user=editor, status="running"
    )
    return conversation, draft


def _invitations(apps, project, users) -> tuple[str, str]:
    """A pending invitation and one used already; their links as handed out."""
    Invitation = apps.get_model("roject", "Invitation")
    now = timezone.now()
    Invitation.objects.create(
        project=project,
        role="editor",
        email="newcomer@example.com",
        digest=_digest("pending-secret"),
        created_by=users["owner"],
        expires=now + timedelta(days=7),
    )
    Invitation.objects.create(
        project=project,
        role="viewer",
        digest=_digest("used-secret"),
        created_by=users["owner"],
        expires=now + timedelta(days=7),
        accepted_at=now,
        accepted_by=users["viewer"],
    )
    return _link("pending-secret"), _link("used-secret")


def _tokens(apps, project, users) -> None:
    """A live read-only token with its MCP conversation, and a revoked one."""
    ApiToken = apps.get_model("roject", "ApiToken")
    live = ApiToken.objects.create(
        user=users["editor"],
        name="laptop",
        prefix=TOKEN[:11],
        digest=_digest(TOKEN),
        read_only=True,
    )
    ApiToken.objects.create(
        user=users["editor"],
        name="old laptop",
        prefix=REVOKED_TOKEN[:11],
        digest=_digest(REVOKED_TOKEN),
        revoked=timezone.now(),
    )
    apps.get_model("rojos", "Conversation").objects.create(
        project=project, user=users["editor"], title="MCP: laptop", via_mcp=True, via_token=live
    )


def _audit(apps, project, users) -> None:
    AuditEntry = apps.get_model("roject", "AuditEntry")
    owner = users["owner"]
    for action, details in (
        ("login", {}),
        ("member_added", {"user": "editor", "role": "editor"}),
        ("token_created", {"name": "laptop", "prefix": TOKEN[:11], "read_only": True}),
    ):
        AuditEntry.objects.create(
            action=action,
            actor_kind="user",
            actor_user_id=owner.pk,
            actor_name=owner.username,
            project_id=project.pk,
            project_name=project.name,
            details=details,
            address="127.0.0.1",
        )
