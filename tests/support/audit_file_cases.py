"""The cases of tests/audit/test_audit_actions.py about files, conversations and exports: undo,
restore, deletions (by a person, with a token, by a rojo's tool, over MCP), downloads."""

import httpx2

from roject.identity.tokens import api_token_create
from rojos.models import Conversation, default_tools
from tests.support.audit_cases import Expected, case
from tests.support.fake_provider import stream, text_chunks, tool_call_chunks
from tests.support.helpers import make_rojo
from tests.support.mcp_clients import mcp_url, with_mcp


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
def deleted_file_restored_from_recently_deleted(env):
    change = env.deleted_change()

    def act():
        answer = env.api().post(
            f"/api/projects/{env.project.pk}/files/deleted/restore", json={"change": change.pk}
        )
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
        # The call's request's address, as the web's entries have theirs.
        return Expected(
            "file_deleted", "token", name, env.project.pk, "gone.md", details, (secret,)
        )

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
