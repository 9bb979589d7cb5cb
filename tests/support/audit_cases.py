"""The cases of tests/audit/test_audit_actions.py: each does its setup and returns `act`, the
audited action done through its real entry point, which returns what the one new entry
must say. Here: configuration (rojos, MCP servers), tokens and projects."""

import io
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from roject.identity.tokens import api_token_create
from roject.models import ApiToken, Project
from roject.storage import project_root_create
from rojos.models import FileChange, McpServer, Rojo
from tests.mcp.test_mcp_config import server_form
from tests.support.helpers import audited, make_rojo
from tests.web.test_admin import rojo_form

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
        details = audited().first().details
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
        entry = audited().first()
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


@case
def project_deleted_in_the_admin(env):
    def act():
        url = reverse("admin:roject_project_delete", args=[env.project.pk])
        assert env.admin.post(url, {"post": "yes"}).status_code == 302
        assert not Project.objects.filter(pk=env.project.pk).exists()
        return Expected("project_deleted", "user", "admin", env.project.pk, "Demo Project")

    return act
