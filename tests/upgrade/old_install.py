"""What an install of the previous release holds, written through that release's models.

`apps` is the migration state's registry: each model as the release's migrations left it, so
a field added since cannot be set here by mistake, and no method of today's classes runs.
Secrets are made as the release made them (an API token's SHA-256 digest, an invitation's
signed link), so today's code must still accept what was handed out then.
"""

import hashlib
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal

from django.conf import settings
from django.contrib.auth.hashers import make_password
from django.core import signing
from django.utils import timezone

from tests.upgrade.old_conversations import old_chat_fill, old_crash_fill, old_fork_fill

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
    chat, changes = old_chat_fill(apps, project, rojo, users["editor"])
    forked = old_fork_fill(apps, project, rojo, users["owner"])
    crashed, draft = old_crash_fill(apps, project, rojo, users["editor"])
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
