"""Every audited action, done through its real entry point, writes exactly one audit entry
naming the right action, actor, project and object, and never a secret.

Entry points: the admin (rojos, MCP servers, tokens, projects), the management commands,
the REST API on the live ASGI server (with a session or an API token), the tokens page,
a rojo's tool call in a turn on the fake provider, and an outside agent's call over MCP.
"""

import io
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx2
import pytest
from django.core.management import call_command
from django.forms.models import model_to_dict
from django.test import Client
from django.urls import reverse

from roject.models import ApiToken, AuditAction, AuditEntry, Project
from roject.storage import project_root_create
from roject.tokens import api_token_create
from rojos.models import Conversation, FileChange, McpServer, Rojo, default_tools
from tests.fake_provider import stream, text_chunks, tool_call_chunks
from tests.helpers import make_rojo
from tests.mcp_clients import mcp_url, with_mcp
from tests.test_admin import rojo_form
from tests.test_mcp_config import server_form

pytestmark = pytest.mark.django_db(transaction=True)

KEY = "sk-audit-secret-key-4711"
HEADER_SECRET = "hdr-secret-0815"
ENV_SECRET = "env-secret-2342"


@dataclass
class Expected:
    """What the one new entry must say."""

    action: str
    actor_kind: str
    actor_name: str
    project: int | None
    object: str
    details: dict = field(default_factory=dict)
    secrets: tuple[str, ...] = ()
    address: str | None = "127.0.0.1"  # a request's; None for what no request did


@dataclass
class Env:
    users: dict
    project: Project
    admin: Client
    client_for: Callable
    asgi_server: str
    fake_provider: object
    server_process: Callable

    def root(self):
        return project_root_create(self.project.pk)

    def api(self, who: str = "editor"):
        return self.client_for(self.users[who])

    def deleted_change(self, path: str = "notes.txt") -> FileChange:
        """A file the editor deleted through the API (its own entry is made before `act`)."""
        (self.root() / path).write_text("old text")
        answer = self.api().post(
            f"/api/projects/{self.project.pk}/files/delete", json={"path": path}
        )
        assert answer.status_code == 200, answer.text
        return FileChange.objects.get(pk=answer.json()["change"])


CASES: dict[str, Callable[[Env], Callable[[], Expected]]] = {}


def case(make):
    """A case does its setup and returns `act`: the audited action, returning what to expect."""
    CASES[make.__name__] = make
    return make


@case
def rojo_added_in_the_admin(env):
    def act():
        url = reverse("admin:rojos_rojo_add")
        assert env.admin.post(url, rojo_form(api_key=KEY)).status_code == 302
        details = AuditEntry.objects.first().details
        assert "api_key" in details["fields"] and "api_key" not in details["values"]
        assert details["values"]["model"] == {"from": None, "to": "example-model"}
        return Expected("rojo_created", "user", "admin", None, "Admin Rojo", {}, (KEY,))

    return act


@case
def rojo_changed_in_the_admin(env):
    rojo = make_rojo("https://api.example.com/v1", api_key="sk-old-key-1")

    def act():
        url = reverse("admin:rojos_rojo_change", args=[rojo.pk])
        data = rojo_form(name="Test rojo", slug="test-rojo", model="bigger", api_key=KEY)
        data["tools"] = rojo.tools
        assert env.admin.post(url, data).status_code == 302
        entry = AuditEntry.objects.first()
        assert {"api_key", "model"} <= set(entry.details["fields"])
        assert "name" not in entry.details["fields"]
        assert entry.details["values"]["model"] == {"from": "fake-model", "to": "bigger"}
        assert "api_key" not in entry.details["values"]
        return Expected("rojo_changed", "user", "admin", None, "Test rojo", {}, (KEY, "sk-old"))

    return act


@case
def rojo_deleted_in_the_admin(env):
    rojo = make_rojo("https://api.example.com/v1", api_key=KEY)

    def act():
        url = reverse("admin:rojos_rojo_delete", args=[rojo.pk])
        assert env.admin.post(url, {"post": "yes"}).status_code == 302
        assert not Rojo.objects.filter(pk=rojo.pk).exists()
        return Expected("rojo_deleted", "user", "admin", None, "Test rojo", {}, (KEY,))

    return act


@case
def rojo_created_by_command(env):
    def act():
        call_command(
            "create_rojo",
            name="Cmd Rojo",
            base_url="https://api.example.com/v1",
            model="m1",
            api_key_env="ROJO_KEY_VAR",
            stdout=io.StringIO(),
        )
        details = {"command": "create_rojo"}
        return Expected("rojo_created", "system", "", None, "Cmd Rojo", details)

    return act


@case
def rojo_configured_by_the_demo_command(env):
    def act():
        call_command("demo", stdout=io.StringIO())
        details = {"command": "demo", "fields": ["api_key_env", "base_url", "model", "name"]}
        return Expected("rojo_created", "system", "", None, "Demo rojo", details)

    return act


@case
def mcp_server_added_in_the_admin(env):
    def act():
        data = server_form(set_env=f"TOKEN={ENV_SECRET}\nMODE=x")
        assert env.admin.post(reverse("admin:rojos_mcpserver_add"), data).status_code == 302
        details = {"env": ["MODE", "TOKEN"]}
        return Expected("mcp_server_created", "user", "admin", None, "Edge", details, (ENV_SECRET,))

    return act


@case
def mcp_server_changed_in_the_admin(env):
    server = McpServer.objects.create(
        name="Web", slug="web", transport="http", url="https://mcp.example.com/mcp"
    )

    def act():
        url = reverse("admin:rojos_mcpserver_change", args=[server.pk])
        data = server_form(
            name="Web",
            slug="web",
            transport="http",
            command="",
            args="[]",
            url="https://mcp.example.com/mcp",
            set_headers=f"Authorization=Bearer {HEADER_SECRET}",
        )
        response = env.admin.post(url, data)
        assert response.status_code == 302, response.content.decode()[:2000]
        details = {"headers": ["Authorization"], "fields": ["headers"]}
        secrets = (HEADER_SECRET,)
        return Expected("mcp_server_changed", "user", "admin", None, "Web", details, secrets)

    return act


@case
def mcp_server_deleted_in_the_admin(env):
    server = McpServer.objects.create(
        name="Web", slug="web", transport="http", headers={"Authorization": HEADER_SECRET}
    )

    def act():
        url = reverse("admin:rojos_mcpserver_delete", args=[server.pk])
        assert env.admin.post(url, {"post": "yes"}).status_code == 302
        secrets = (HEADER_SECRET,)
        return Expected("mcp_server_deleted", "user", "admin", None, "Web", {}, secrets)

    return act


@case
def mcp_server_created_by_command(env):
    def act():
        call_command(
            "create_mcp_server",
            name="Timer",
            command="mcp-server-time --local-timezone UTC",
            env=[f"TOKEN={ENV_SECRET}"],
            stdout=io.StringIO(),
        )
        details = {"command": "create_mcp_server", "env": ["TOKEN"]}
        return Expected("mcp_server_created", "system", "", None, "Timer", details, (ENV_SECRET,))

    return act


@case
def change_undone_through_the_api(env):
    change = env.deleted_change()

    def act():
        answer = env.api().post(f"/api/changes/{change.pk}/undo")
        assert answer.status_code == 200, answer.text
        assert (env.root() / "notes.txt").read_text() == "old text"
        details = {"tool": "delete_path", "paths": "notes.txt"}
        name = "delete_path: notes.txt"
        return Expected("undo", "user", "editor", env.project.pk, name, details)

    return act


@case
def version_restored_through_the_api(env):
    change = env.deleted_change()

    def act():
        answer = env.api().post(
            f"/api/projects/{env.project.pk}/files/restore",
            json={"change": change.pk, "path": "notes.txt"},
        )
        assert answer.status_code == 200, answer.text
        details = {"tool": "restore"}
        return Expected("restore", "user", "editor", env.project.pk, "notes.txt", details)

    return act


@case
def file_deleted_by_a_person(env):
    (env.root() / "a <script>.txt").write_text("x")

    def act():
        answer = env.api().post(
            f"/api/projects/{env.project.pk}/files/delete", json={"path": "a <script>.txt"}
        )
        assert answer.status_code == 200, answer.text
        details = {"tool": "delete_path"}
        return Expected("file_deleted", "user", "editor", env.project.pk, "a <script>.txt", details)

    return act


@case
def file_deleted_with_an_api_token(env):
    (env.root() / "old.txt").write_text("x")
    secret = api_token_create(user=env.users["editor"], name="ci").secret

    def act():
        answer = httpx2.post(
            f"{env.asgi_server}/api/projects/{env.project.pk}/files/delete",
            json={"path": "old.txt"},
            headers={"Authorization": f"Bearer {secret}", "X-Forwarded-For": "203.0.113.9"},
        )
        assert answer.status_code == 200, answer.text
        name = "editor (token ci)"
        expected = Expected("file_deleted", "token", name, env.project.pk, "old.txt", {}, (secret,))
        # uvicorn takes the address from a proxy on 127.0.0.1 itself (ROJO_PROXY_COUNT is 0).
        expected.address = "203.0.113.9"
        return expected

    return act


@case
def file_deleted_by_a_rojos_tool(env):
    rojo = make_rojo(
        env.fake_provider.base_url, tools=[*default_tools(), "delete_path"], approval_tools=[]
    )
    (env.root() / "draft.md").write_text("x")
    env.fake_provider.add(
        stream(*tool_call_chunks([("delete_path", {"path": "draft.md"})])),
        stream(*text_chunks("Deleted.")),
    )

    def act():
        events = env.api().chat(env.project.pk, rojo=rojo.slug, message="Delete the draft")
        assert events[-1].type == "DONE"
        assert not (env.root() / "draft.md").exists()
        conversation = Conversation.objects.get(project=env.project)
        details = {"rojo": "test-rojo", "conversation": conversation.pk, "tool": "delete_path"}
        expected = Expected("file_deleted", "user", "editor", env.project.pk, "draft.md", details)
        expected.address = None  # the turn's call, not a request
        return expected

    return act


@case
def file_deleted_over_mcp(env):
    server = env.server_process()
    (env.root() / "gone.md").write_text("x")
    secret = api_token_create(user=env.users["editor"], name="agent").secret

    def act():
        result = with_mcp(
            mcp_url(server.base_url, env.project.slug),
            secret,
            lambda client: client.call_tool("delete_path", {"path": "gone.md"}),
        )
        assert not result.is_error
        conversation = Conversation.objects.get(project=env.project, via_mcp=True)
        details = {"conversation": conversation.pk, "tool": "delete_path", "rojo": None}
        name = "editor (token agent)"
        expected = Expected(
            "file_deleted", "token", name, env.project.pk, "gone.md", details, (secret,)
        )
        expected.address = None  # the call runs in the token's MCP turn, not a request's
        return expected

    return act


@case
def token_made_on_the_tokens_page(env):
    client = Client()
    client.force_login(env.users["editor"])
    page = client.get(reverse("api_tokens")).content.decode()
    once = re.search(r'name="once" value="([^"]+)"', page).group(1)
    made: list[str] = []

    def act():
        answer = client.post(reverse("api_tokens"), {"name": "laptop", "once": once})
        made.extend(re.findall(r"rojo_[A-Za-z0-9]{40}", answer.content.decode()))
        assert len(made) == 1
        token = ApiToken.objects.get(name="laptop")
        details = {"name": "laptop", "prefix": token.prefix}
        shown = f"laptop ({token.prefix}…)"
        return Expected("token_created", "user", "editor", None, shown, details, (made[0],))

    return act


@case
def token_made_by_command(env):
    out = io.StringIO()

    def act():
        call_command("create_api_token", user="editor", name="ci bot", stdout=out)
        secret = out.getvalue().strip()
        assert secret.startswith("rojo_")
        details = {"command": "create_api_token", "name": "ci bot", "user": "editor"}
        shown = f"ci bot ({secret[:11]}…)"
        return Expected("token_created", "system", "", None, shown, details, (secret,))

    return act


@case
def token_revoked_on_the_tokens_page(env):
    made = api_token_create(user=env.users["editor"], name="old laptop")
    client = Client()
    client.force_login(env.users["editor"])

    def act():
        answer = client.post(reverse("api_token_revoke", args=[made.token.pk]))
        assert answer.status_code == 302
        details = {"prefix": made.token.prefix}
        secrets = (made.secret,)
        shown = str(made.token)
        return Expected("token_revoked", "user", "editor", None, shown, details, secrets)

    return act


@case
def token_revoked_in_the_admin(env):
    made = api_token_create(user=env.users["viewer"], name="leaked")

    def act():
        url = reverse("admin:roject_apitoken_changelist")
        data = {"action": "revoke", "_selected_action": [made.token.pk]}
        assert env.admin.post(url, data).status_code == 302
        details = {"user": "viewer"}
        shown = str(made.token)
        return Expected("token_revoked", "user", "admin", None, shown, details, (made.secret,))

    return act


def _conversation(env) -> Conversation:
    return Conversation.objects.create(
        project=env.project, user=env.users["editor"], title="Plan <b>bold</b>"
    )


@case
def conversation_exported(env):
    conversation = _conversation(env)

    def act():
        answer = env.api("viewer").get(
            f"/api/conversations/{conversation.pk}/export", params={"format": "markdown"}
        )
        assert answer.status_code == 200
        details = {"format": "markdown"}
        title = "Plan <b>bold</b>"
        return Expected("export", "user", "viewer", env.project.pk, title, details)

    return act


@case
def project_downloaded_as_zip(env):
    (env.root() / "a.txt").write_text("A")

    def act():
        answer = env.api("viewer").get(f"/api/projects/{env.project.pk}/files/download")
        assert answer.status_code == 200 and answer.content[:2] == b"PK"
        return Expected("export", "user", "viewer", env.project.pk, "/", {"format": "zip"})

    return act


@case
def conversation_deleted(env):
    conversation = _conversation(env)

    def act():
        answer = env.api().http.delete(f"/api/conversations/{conversation.pk}")
        assert answer.status_code == 200, answer.text
        title = "Plan <b>bold</b>"
        return Expected("conversation_deleted", "user", "editor", env.project.pk, title)

    return act


@case
def project_deleted_in_the_admin(env):
    def act():
        url = reverse("admin:roject_project_delete", args=[env.project.pk])
        assert env.admin.post(url, {"post": "yes"}).status_code == 302
        assert not Project.objects.filter(pk=env.project.pk).exists()
        return Expected("project_deleted", "user", "admin", env.project.pk, "Demo Project")

    return act


@pytest.fixture
def env(users, project, admin_client, client_for, asgi_server, fake_provider, server_process):
    return Env(users, project, admin_client, client_for, asgi_server, fake_provider, server_process)


def _serialized(entry: AuditEntry) -> str:
    return json.dumps(model_to_dict(entry), default=str)


@pytest.mark.parametrize("name", list(CASES))
def test_each_audited_action_writes_exactly_one_entry_without_secrets(name, env):
    act = CASES[name](env)
    before = set(AuditEntry.objects.values_list("pk", flat=True))
    expected = act()
    new = list(AuditEntry.objects.exclude(pk__in=before))
    assert [entry.action for entry in new] == [expected.action]
    entry = new[0]
    assert (entry.actor_kind, entry.actor_name) == (expected.actor_kind, expected.actor_name)
    assert entry.project_id == expected.project
    assert entry.object_repr == expected.object
    for key, value in expected.details.items():
        assert entry.details[key] == value, entry.details
    assert entry.address == (expected.address if expected.actor_kind != "system" else None)
    for secret in expected.secrets:
        assert secret not in _serialized(entry)
    assert AuditAction(entry.action)


def test_a_single_file_download_is_no_export(env):
    (env.root() / "a.txt").write_text("A")
    answer = env.api().get(
        f"/api/projects/{env.project.pk}/files/download", params={"path": "a.txt"}
    )
    assert answer.status_code == 200 and answer.content == b"A"
    assert list(AuditEntry.objects.values_list("details", flat=True)) == []


def test_a_rojo_saved_unchanged_in_the_admin_writes_no_entry(env):
    rojo = make_rojo("https://api.example.com/v1", api_key=KEY)
    data = rojo_form(
        name=rojo.name, slug=rojo.slug, base_url=rojo.base_url, model=rojo.model, tools=rojo.tools
    )
    data.update(max_output_tokens="", approval_tools=rojo.approval_tools)
    assert (
        env.admin.post(reverse("admin:rojos_rojo_change", args=[rojo.pk]), data).status_code == 302
    )
    assert list(AuditEntry.objects.values_list("details", flat=True)) == []
