"""Rojo as an MCP server: the SDK's own client, over HTTP, against a real server process.

A token acts as its user: the project's tools are listed with our descriptions, schemas and
hints; each call runs as a turn of the token's MCP conversation, with the chat's role
checks, limits and undo records; viewers and read-only tokens never write; bad tokens are
401 and projects the user cannot see 404.
"""

import importlib
import json
import sys

import httpx2
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from roject.identity.tokens import api_token_create, api_token_revoke
from roject.models import ApiToken, AuditEntry
from roject.storage import project_root_create
from rojos.models import Conversation, FileChange, Message, TurnRecord
from rojos.tools import BUILTIN_TOOLS
from tests.support.helpers import assert_history_valid, make_rojo, stored_history
from tests.support.mcp_clients import mcp_url, with_mcp

pytestmark = pytest.mark.django_db(transaction=True)

BUILTIN_NAMES = [tool.name for tool in BUILTIN_TOOLS]
WRITING = {tool.name for tool in BUILTIN_TOOLS if tool.writes}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "curl", "version": "1"},
    },
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


# The module's server process (tests.support.server_process), with the test app's tools
# registered and served over MCP.
MODULE_SERVER_ENV = {
    "ROJO_TOOL_MODULES": "tests.support.example_tools",
    "ROJO_MCP_SERVE_USER_TOOLS": "1",
}


@pytest.fixture
def server(module_server):
    return module_server


def secret_for(user, **options) -> str:
    return api_token_create(user=user, name=options.pop("name", "laptop"), **options).secret


def text_of(result: types.CallToolResult) -> str:
    return "".join(part.text for part in result.content)


@pytest.fixture
def registry_with_example_tools():
    """The server process's user tools, registered in this process too for one test: the
    registry is the process's, and the next tests must not find them there."""
    from rojos.tools import registry

    before = {tool.name for tool in registry}
    sys.modules.pop("tests.support.example_tools", None)
    importlib.import_module("tests.support.example_tools")
    yield registry
    for name in {tool.name for tool in registry} - before:
        registry.unregister(name)
    sys.modules.pop("tests.support.example_tools", None)


def test_tools_are_listed_with_our_descriptions_schemas_and_hints(
    server, users, project, registry_with_example_tools
):
    """An editor's token lists every built-in and registered user tool, as the rojos see
    them, with readOnlyHint on the tools that read and destructiveHint on those that
    replace or remove."""
    registry = registry_with_example_tools

    listed = with_mcp(
        mcp_url(server.base_url, project.slug),
        secret_for(users["editor"]),
        lambda client: client.list_tools(),
    )
    tools = {tool.name: tool for tool in listed.tools}
    assert list(tools)[: len(BUILTIN_NAMES)] == BUILTIN_NAMES
    assert {"stamp_file", "shout"} <= set(tools)
    for name, tool in tools.items():
        ours = registry.get(name)
        assert tool.description == ours.description
        assert tool.input_schema == ours.parameters
        assert tool.annotations.read_only_hint is (not ours.writes)
        assert tool.annotations.open_world_hint is False
    assert tools["delete_path"].annotations.destructive_hint is True
    assert tools["write_text_content"].annotations.destructive_hint is True
    assert tools["create_directory"].annotations.destructive_hint is False
    assert tools["get_text_content"].annotations.destructive_hint is None


def test_each_tool_runs_and_is_kept_as_a_turn_of_the_tokens_mcp_conversation(
    server, users, project
):
    """Each built-in tool called through MCP does what it does in the chat; each call is a
    turn (user message, call, result, done record) of one conversation per token and
    project, titled "via MCP (<token name>)", and changes have undo records."""
    root = project_root_create(project.pk)
    (root / "old.txt").write_text("alpha beta\n")
    calls = [
        ("create_directory", {"path": "docs"}),
        ("write_text_content", {"path": "docs/a.md", "text": "hello world\n"}),
        ("read_path_meta", {"path": "docs/a.md"}),
        ("get_text_content", {"path": "docs/a.md"}),
        ("list_files", {"path": "docs"}),
        (
            "edit_text_content",
            {"path": "old.txt", "edits": [{"old_text": "beta", "new_text": "gamma"}]},
        ),
        ("search_text", {"query": "gamma"}),
        ("move_path", {"source": "docs/a.md", "destination": "docs/b.md"}),
        ("delete_path", {"path": "docs/b.md"}),
        ("shout", {"text": "quiet"}),
    ]

    async def work(client):
        return [await client.call_tool(name, args) for name, args in calls]

    results = with_mcp(mcp_url(server.base_url, project.pk), secret_for(users["editor"]), work)

    assert [r.is_error for r in results] == [False] * len(calls), [text_of(r) for r in results]
    by_name = dict(zip([name for name, _ in calls], results, strict=True))
    assert by_name["read_path_meta"].structured_content["type"] == "file"
    assert text_of(by_name["get_text_content"]) == "hello world\n"
    assert '"a.md"' in text_of(by_name["list_files"])
    assert by_name["search_text"].structured_content["matches"][0]["path"] == "old.txt"
    assert by_name["delete_path"].structured_content["deleted"] == ["docs/b.md"]
    assert text_of(by_name["shout"]) == "QUIET"
    assert (root / "old.txt").read_text() == "alpha gamma\n"
    assert sorted(p.name for p in (root / "docs").iterdir()) == []

    conversation = Conversation.objects.get()
    assert (conversation.title, conversation.via_mcp) == ("via MCP (laptop)", True)
    assert conversation.user == users["editor"] and conversation.turn_id is None
    assert {r.meta["rojo.chat/conversation"] for r in results} == {conversation.pk}
    roles = list(Message.objects.filter(conversation=conversation).values_list("role", flat=True))
    assert roles == ["user", "assistant", "tool"] * len(calls)
    records = TurnRecord.objects.filter(conversation=conversation)
    assert [r.status for r in records] == ["done"] * len(calls)
    changed = {c.tool for c in FileChange.objects.filter(conversation=conversation)}
    assert changed == {
        "write_text_content",
        "edit_text_content",
        "move_path",
        "delete_path",
        "create_directory",
    }


def test_the_handshake_free_protocol_works_too_and_failures_are_tool_errors(server, users, project):
    """A client that first asks server/discover (the SDK's "auto") is served as well; a
    path outside the project, bad arguments and an unknown tool are tool errors the agent
    can read (isError), not protocol errors or 500s."""

    async def work(client):
        return [
            await client.call_tool("list_files", {"path": ""}),
            await client.call_tool("get_text_content", {"path": "../../etc/passwd"}),
            await client.call_tool("get_text_content", {"nope": 1}),
            await client.call_tool("no_such_tool", {}),
        ]

    listed, outside, bad, unknown = with_mcp(
        mcp_url(server.base_url, project.slug), secret_for(users["viewer"]), work, mode="auto"
    )
    assert not listed.is_error and text_of(listed) == "[]"
    assert outside.is_error and "../../etc/passwd" in text_of(outside)
    assert "/storage/" not in text_of(outside)  # no server path is named
    assert bad.is_error and "path" in text_of(bad)
    assert unknown.is_error and text_of(unknown).startswith("unknown tool 'no_such_tool'")


def test_a_long_unknown_tool_name_or_uri_is_echoed_cut_short(server, users, project):
    """An unknown tool's name and a resource URI that is not ours are named in the error by
    their first 100 characters and an ellipsis, not echoed whole (a client may send
    megabytes); nothing is stored for the call."""
    name = "x" * 99 + "😀" + "y" * 20_000
    uri = "file:///" + "z" * 20_000

    async def work(client):
        unknown = await client.call_tool(name, {})
        try:
            await client.read_resource(uri)
        except MCPError as exc:
            return unknown, exc
        return unknown, None

    unknown, foreign = with_mcp(
        mcp_url(server.base_url, project.pk), secret_for(users["editor"]), work
    )
    assert unknown.is_error
    assert text_of(unknown).startswith(f"unknown tool {name[:100] + '…'!r}; available tools: ")
    assert "y" * 30 not in text_of(unknown)
    assert foreign is not None
    assert foreign.error.message == f"Not a file of this project: {uri[:100]}…"
    assert Message.objects.count() == 0


@pytest.mark.parametrize("who", ["viewer", "read-only token"])
def test_writes_are_refused_to_viewers_and_read_only_tokens(server, users, project, who):
    """A viewer's token, and an editor's read-only token, list only the tools that read; a
    writing call anyway is a tool error, and nothing is written or stored for it."""
    if who == "viewer":
        secret, because = secret_for(users["viewer"]), "your role in this project is read-only"
    else:
        secret = secret_for(users["editor"], read_only=True)
        because = "this API token is read-only"

    async def work(client):
        listed = await client.list_tools()
        written = await client.call_tool("write_text_content", {"path": "x.txt", "text": "x"})
        read = await client.call_tool("list_files", {"path": ""})
        return listed, written, read

    listed, written, read = with_mcp(mcp_url(server.base_url, project.pk), secret, work)

    assert {tool.name for tool in listed.tools} == set(BUILTIN_NAMES) - WRITING | {"shout"}
    assert written.is_error and because in text_of(written)
    assert not read.is_error
    assert not (project_root_create(project.pk) / "x.txt").exists()
    assert FileChange.objects.count() == 0
    assert Message.objects.filter(name="write_text_content").count() == 0


def test_with_owner_approval_on_a_non_owners_change_is_refused_and_an_owners_runs(
    server, users, project
):
    """With "changes need approval by an owner" on, an editor's token may add a file but
    not change one that is there: nobody could approve it, so it is a tool error saying
    an owner must approve such changes in the app; nothing changes or is stored for it.
    An owner's token changes the file as before."""
    project.owner_approval = True
    project.save(update_fields=["owner_approval"])
    root = project_root_create(project.pk)
    (root / "notes.txt").write_text("mine\n")
    overwrite = ("write_text_content", {"path": "notes.txt", "text": "theirs\n"})
    url = mcp_url(server.base_url, project.pk)

    async def editor_work(client):
        added = await client.call_tool("write_text_content", {"path": "new.txt", "text": "n"})
        changed = await client.call_tool(*overwrite)
        deleted = await client.call_tool("delete_path", {"path": "notes.txt"})
        return added, changed, deleted

    added, changed, deleted = with_mcp(url, secret_for(users["editor"]), editor_work)

    assert not added.is_error and (root / "new.txt").read_text() == "n"
    for refused in (changed, deleted):
        assert refused.is_error
        assert "an owner must approve such changes in the app" in text_of(refused)
    assert (root / "notes.txt").read_text() == "mine\n"
    assert Message.objects.filter(name__in=["delete_path"]).count() == 0
    assert Message.objects.filter(name="write_text_content").count() == 1

    async def owner_work(client):
        return await client.call_tool(*overwrite)

    done = with_mcp(url, secret_for(users["owner"]), owner_work)
    assert not done.is_error, text_of(done)
    assert (root / "notes.txt").read_text() == "theirs\n"


def test_an_mcp_write_is_undone_through_the_api_with_the_same_token(server, users, project):
    """A write through MCP names its change record; POST /api/changes/<id>/undo with the
    token as bearer (no CSRF token) puts the file back, and the change is listed, undone,
    in the MCP conversation."""
    root = project_root_create(project.pk)
    (root / "notes.txt").write_text("before\n")
    secret = secret_for(users["editor"], name="agent")

    result = with_mcp(
        mcp_url(server.base_url, project.slug),
        secret,
        lambda c: c.call_tool("write_text_content", {"path": "notes.txt", "text": "after\n"}),
    )
    assert (root / "notes.txt").read_text() == "after\n"
    change = result.meta["rojo.chat/change"]

    bearer = {"Authorization": f"Bearer {secret}"}
    undone = httpx2.post(f"{server.base_url}/api/changes/{change}/undo", headers=bearer)
    assert undone.status_code == 200, undone.text
    assert undone.json() == {"undone": [change]}
    assert (root / "notes.txt").read_text() == "before\n"
    conversation = result.meta["rojo.chat/conversation"]
    detail = httpx2.get(f"{server.base_url}/api/conversations/{conversation}", headers=bearer)
    assert detail.json()["title"] == "via MCP (agent)"
    assert [c["undone"] is not None for c in detail.json()["changes"]] == [True]
    assert FileChange.objects.get(pk=change).undone_by == users["editor"]

    rojo = make_rojo("http://127.0.0.1:9/v1")  # never called: the message is refused first
    message = {"rojo": rojo.slug, "message": "and now?", "conversation": conversation}
    chat = httpx2.post(
        f"{server.base_url}/api/projects/{project.pk}/chat", headers=bearer, json=message
    )
    assert chat.status_code == 400 and "through MCP" in chat.json()["detail"]


def test_a_deletion_over_mcp_is_audited_with_the_token_and_the_projects_name(
    server, users, project
):
    """delete_path through MCP writes one file_deleted entry naming the token, the path
    and the project by id and by name, so the entry still says where once the project
    is gone, and the client's address, as the web's entries do (before, it had none)."""
    (project_root_create(project.pk) / "old.txt").write_text("x\n")
    secret = secret_for(users["editor"], name="agent")

    deleted = with_mcp(
        mcp_url(server.base_url, project.pk),
        secret,
        lambda c: c.call_tool("delete_path", {"path": "old.txt"}),
        # The server takes the address from a proxy on 127.0.0.1 (uvicorn's own rule).
        headers={"X-Forwarded-For": "203.0.113.7"},
    )
    assert not deleted.is_error, text_of(deleted)

    entry = AuditEntry.objects.get(action="file_deleted")
    assert (entry.actor_kind, entry.actor_name) == ("token", "editor (token agent)")
    assert (entry.project_id, entry.project_name) == (project.pk, project.name)
    assert entry.object_id == "old.txt"
    assert entry.details["change"] == deleted.meta["rojo.chat/change"]
    assert entry.address == "203.0.113.7"


def _post(server, project, secret: str | None) -> httpx2.Response:
    headers = dict(MCP_HEADERS)
    if secret is not None:
        headers["Authorization"] = f"Bearer {secret}"
    return httpx2.post(mcp_url(server.base_url, project), json=INITIALIZE, headers=headers)


def test_missing_bad_expired_and_revoked_tokens_get_401_with_www_authenticate(
    server, users, project
):
    """Without a live token the endpoint answers 401 with a Bearer challenge, before any
    MCP message is read; an expired or revoked token is refused like an unknown one."""
    expired = api_token_create(user=users["editor"], name="old", expires_days=1)
    ApiToken.objects.filter(pk=expired.token.pk).update(expires="2000-01-01T00:00Z")
    revoked = api_token_create(user=users["editor"], name="gone")
    api_token_revoke(user=users["editor"], token_id=revoked.token.pk)

    for secret in (None, "rojo_" + "x" * 40, "not-a-token", expired.secret, revoked.secret):
        answer = _post(server, project.pk, secret)
        assert answer.status_code == 401, (secret, answer.text)
        assert answer.headers["WWW-Authenticate"].startswith('Bearer error="invalid_token"')
    assert _post(server, project.pk, secret_for(users["editor"])).status_code == 200


def test_get_opens_no_stream_that_would_stay_open_for_nothing(server, users, project):
    """The endpoint keeps no session, so it never has anything to send on a GET stream:
    a GET is 405 (Allow: POST), as the transport says for a server without one, and the
    SDK's clients go on without it; before, each client (the TypeScript SDK opens one
    after initialize) held a stream open for good, a revoked token's too. Any other
    method but POST is 405 with Allow: POST too (the SDK's named GET and DELETE)."""
    headers = {
        "Accept": "text/event-stream",
        "Authorization": f"Bearer {secret_for(users['editor'])}",
    }
    url = mcp_url(server.base_url, project.pk)

    with httpx2.stream("GET", url, headers=headers, timeout=10) as answer:
        assert answer.status_code == 405
        assert answer.headers["Allow"] == "POST"
    assert httpx2.get(url, headers={"Accept": "text/event-stream"}).status_code == 401
    for method in ("DELETE", "PUT"):  # no session to end: only POST is served
        answer = httpx2.request(method, url, headers=headers)
        assert (answer.status_code, answer.headers["Allow"]) == (405, "POST")


def test_a_project_the_user_cannot_see_is_404_like_a_missing_one(server, users, project):
    """The outsider's token gets the same 404 for the project as for one that does not
    exist, by id and by slug."""
    outsider = secret_for(users["outsider"])
    answers = [
        _post(server, ref, outsider) for ref in (project.pk, project.slug, 999999, "nothing")
    ]
    assert {(a.status_code, a.text) for a in answers} == {(404, '{"error": "No such project."}')}


def test_a_token_revoked_mid_session_is_refused_at_its_next_call(server, users, project):
    """Revocation takes effect at the next request: the client's next call fails, and no
    call is stored after it."""
    made = api_token_create(user=users["editor"], name="laptop")

    async def work(client):
        first = await client.call_tool("list_files", {"path": ""})
        await _revoke(made)
        try:
            await client.call_tool("write_text_content", {"path": "late.txt", "text": "x"})
        except MCPError as exc:
            return first, exc
        return first, None

    first, refused = with_mcp(mcp_url(server.base_url, project.pk), made.secret, work)
    assert not first.is_error
    assert isinstance(refused, MCPError)  # the SDK's error for the HTTP answer
    assert f'"POST /mcp/projects/{project.pk} HTTP/1.1" 401' in server.log()
    assert not (project_root_create(project.pk) / "late.txt").exists()
    assert TurnRecord.objects.count() == 1


async def _revoke(made) -> None:
    from asgiref.sync import sync_to_async

    await sync_to_async(api_token_revoke)(user=made.token.user, token_id=made.token.pk)


def test_the_per_user_limits_apply_to_mcp_calls(server_process, users, project):
    """Each call counts as a message toward ROJO_USER_MESSAGES_PER_MINUTE: past it the call
    is a tool error saying so, and is not run."""
    limited = server_process(ROJO_USER_MESSAGES_PER_MINUTE="2")

    async def work(client):
        return [await client.call_tool("create_directory", {"path": f"d{n}"}) for n in range(3)]

    results = with_mcp(mcp_url(limited.base_url, project.pk), secret_for(users["editor"]), work)
    assert [r.is_error for r in results] == [False, False, True]
    assert "in the last minute" in text_of(results[2])
    assert not (project_root_create(project.pk) / "d2").exists()


def test_the_projects_text_files_are_resources(server, users, project):
    """resources/list gives the project's files as rojo://files/<path>, with a template for
    any path; resources/read gives a file's text through the storage gate, and a path
    outside the project is an error, not a read."""
    root = project_root_create(project.pk)
    (root / "docs").mkdir()
    (root / "docs" / "intro.md").write_text("# Intro\n")
    (root / "top.txt").write_text("top\n")

    async def work(client):
        listed = await client.list_resources()
        templates = await client.list_resource_templates()
        read = await client.read_resource("rojo://files/docs/intro.md")
        try:
            await client.read_resource("rojo://files/../outside.txt")
        except MCPError as exc:
            return listed, templates, read, exc
        return listed, templates, read, None

    listed, templates, read, outside = with_mcp(
        mcp_url(server.base_url, project.pk), secret_for(users["viewer"]), work
    )
    assert [(r.uri, r.mime_type) for r in listed.resources] == [
        ("rojo://files/top.txt", "text/plain"),
        ("rojo://files/docs/intro.md", "text/markdown"),
    ]
    assert [t.uri_template for t in templates.resource_templates] == ["rojo://files/{+path}"]
    assert [c.text for c in read.contents] == ["# Intro\n"]
    assert outside is not None and "outside.txt" in outside.error.message


def test_binary_files_are_listed_with_their_type_and_read_as_base64_blobs(server, users, project):
    """A file's MIME type is its name's, or, with a name that gives none, text/plain for
    UTF-8 and application/octet-stream for anything else; the listing and a read agree.
    A read gives text as text and anything else (an image, bytes that are not UTF-8) as a
    base64 blob with the very bytes; before, binaries were listed as text/plain and
    their reads refused."""
    import base64

    png = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"
    files = {
        "Makefile": b"all:\n\techo hi\n",
        "core": b"\x7fELF\x02\x01\x00\x00",
        "latin.txt": "caf\u00e9\n".encode("latin-1"),
        "pic.png": png,
        "app.ts": b"export const answer: number = 42;\n",  # not video/mp2t, on any host
    }
    root = project_root_create(project.pk)
    for name, data in files.items():
        (root / name).write_bytes(data)

    async def work(client):
        listed = await client.list_resources()
        reads = [await client.read_resource(f"rojo://files/{name}") for name in files]
        return listed, reads

    listed, reads = with_mcp(
        mcp_url(server.base_url, project.pk), secret_for(users["viewer"]), work
    )

    types_listed = {r.name: r.mime_type for r in listed.resources}
    assert types_listed == {
        "Makefile": "text/plain",
        "core": "application/octet-stream",
        "latin.txt": "text/plain",
        "pic.png": "image/png",
        "app.ts": "text/x-typescript",
    }
    read = {r.contents[0].uri.removeprefix("rojo://files/"): r.contents[0] for r in reads}
    assert {name: c.mime_type for name, c in read.items()} == types_listed
    assert isinstance(read["Makefile"], types.TextResourceContents)
    assert read["Makefile"].text == "all:\n\techo hi\n"
    assert read["app.ts"].text == "export const answer: number = 42;\n"
    for name in ("core", "latin.txt", "pic.png"):
        assert isinstance(read[name], types.BlobResourceContents), name
        assert base64.b64decode(read[name].blob) == files[name]


def test_a_database_out_of_reach_is_503_with_retry_after(server_process, project):
    """A token cannot be checked without the database: the answer says so with 503 and
    Retry-After, never a 500."""
    down = server_process(DATABASE_URL="sqlite:////nonexistent-dir/db.sqlite3")
    answer = _post(down, project.pk, "rojo_" + "x" * 40)
    assert answer.status_code == 503, answer.text
    assert answer.headers["Retry-After"] == "5"
    assert "database" in answer.json()["error"]


def test_calls_sent_at_once_take_turns_in_the_one_conversation(server, users, project):
    """An agent's parallel calls with one token all run, one after another: one MCP
    conversation, every call answered right after it, every write undoable."""
    import asyncio

    async def work(client):
        writes = [
            client.call_tool("write_text_content", {"path": f"f{n}.txt", "text": f"{n}\n"})
            for n in range(4)
        ]
        return await asyncio.gather(*writes)

    results = with_mcp(mcp_url(server.base_url, project.pk), secret_for(users["editor"]), work)

    assert [r.is_error for r in results] == [False] * 4, [text_of(r) for r in results]
    conversation = Conversation.objects.get()
    assert_history_valid(stored_history(conversation.pk))
    assert FileChange.objects.filter(conversation=conversation).count() == 4
    root = project_root_create(project.pk)
    assert sorted(p.read_text() for p in root.iterdir()) == ["0\n", "1\n", "2\n", "3\n"]


def test_many_calls_sent_at_once_all_run_in_their_turn(server_process, users, project):
    """Forty quick calls of one token sent at once all run: the calls waiting for their
    turn do not crowd the database the running one needs (each polled it twenty times a
    second, and the calls sent last ran out their 30 s refused)."""
    busy = server_process(ROJO_USER_MESSAGES_PER_MINUTE="0", ROJO_USER_CONCURRENT_TURNS="0")
    (project_root_create(project.pk) / "a.txt").write_text("a\n")

    async def work(client):
        import asyncio

        calls = [client.call_tool("read_path_meta", {"path": "a.txt"}) for _ in range(40)]
        return await asyncio.gather(*calls)

    results = with_mcp(mcp_url(busy.base_url, project.pk), secret_for(users["viewer"]), work)

    refused = [text_of(r) for r in results if r.is_error]
    assert refused == []
    assert TurnRecord.objects.filter(status="done").count() == 40


def _call_body(arguments: dict) -> dict:
    return {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "list_files", "arguments": arguments},
    }


def test_a_body_over_the_limit_is_413_whether_declared_or_sent_in_chunks(
    server_process, users, project
):
    """A request body over ROJO_MCP_MAX_BODY_BYTES is answered 413, whether its
    Content-Length says so or it comes in chunks without one; nothing is stored, and a
    call under the limit still runs."""
    limited = server_process(ROJO_MCP_MAX_BODY_BYTES="20000")
    url = mcp_url(limited.base_url, project.pk)
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {secret_for(users['editor'])}"}

    big = json.dumps(_call_body({"path": "", "pad": "A" * 50_000})).encode()
    declared = httpx2.post(url, content=big, headers=headers)
    assert declared.status_code == 413 and "20,000 bytes" in declared.text

    def chunks():
        for start in range(0, len(big), 4096):
            yield big[start : start + 4096]

    chunked = httpx2.post(url, content=chunks(), headers=headers)
    assert chunked.status_code == 413 and "20,000 bytes" in chunked.text
    assert Message.objects.count() == 0
    small = httpx2.post(url, json=_call_body({"path": ""}), headers=headers)
    assert small.status_code == 200 and small.json()["result"]["isError"] is False


def test_a_body_limit_raised_over_the_sdks_own_default_is_the_one_applied(
    server_process, users, project
):
    """With ROJO_MAX_WRITE_BYTES raised to 5 MB (so ROJO_MCP_MAX_BODY_BYTES is 10 MB), a
    4.5 MB file is written through MCP: the SDK's own limit (4 MiB) does not refuse it
    first with a bare 413."""
    roomy = server_process(ROJO_MAX_WRITE_BYTES="5000000")
    text = "a" * 4_500_000

    written = with_mcp(
        mcp_url(roomy.base_url, project.pk),
        secret_for(users["editor"]),
        lambda c: c.call_tool("write_text_content", {"path": "big.txt", "text": text}),
    )

    assert not written.is_error, text_of(written)
    assert (project_root_create(project.pk) / "big.txt").stat().st_size == len(text)


@pytest.mark.parametrize(
    ("version", "said"),
    [
        (None, "This server takes no JSON-RPC batches"),
        ("2025-03-26", "This server takes no JSON-RPC batches"),
        ("2025-06-18", "JSON-RPC batches are not part of MCP 2025-06-18"),
        ("2026-07-28", "JSON-RPC batches are not part of MCP 2026-07-28"),
    ],
)
def test_a_batch_is_refused_with_a_json_rpc_error_that_says_so(
    server, users, project, version, said
):
    """A body that is a JSON array (a JSON-RPC batch, which MCP 2025-06-18 took out) is
    answered 400 with one JSON-RPC error, invalid request with no id, saying to send each
    message in a POST of its own, in the words of the protocol version the client names;
    before, it got the SDK's validation error, four pydantic reports long. Nothing in
    the batch is run; a single message still is."""
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {secret_for(users['editor'])}"}
    if version is not None:
        headers["MCP-Protocol-Version"] = version
    url = mcp_url(server.base_url, project.pk)
    call = {
        **_call_body({"path": ""}),
        "params": {"name": "create_directory", "arguments": {"path": "d"}},
    }
    batch = b"\n  " + json.dumps([call, {"jsonrpc": "2.0", "id": 3, "method": "ping"}]).encode()

    answer = httpx2.post(url, content=batch, headers=headers)

    assert answer.status_code == 400
    assert answer.json() == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {
            "code": -32600,
            "message": f"{said}: send each message in a POST of its own",
        },
    }
    assert not (project_root_create(project.pk) / "d").exists()
    assert Message.objects.count() == 0
    headers.pop("MCP-Protocol-Version", None)  # 2026-07-28 asks more of a message
    single = httpx2.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, headers=headers)
    assert (single.status_code, single.json()["result"]) == (200, {})


def test_a_body_after_whitespace_sent_in_pieces_is_read_whole(server, users, project):
    """The batch check reads to the body's first byte that is not whitespace: whitespace
    sent piece by piece before a message (dropped, not held) leaves the message whole, and
    a batch after it is still refused."""
    headers = {
        **MCP_HEADERS,
        "Authorization": f"Bearer {secret_for(users['editor'])}",
        "Content-Type": "application/json",
    }
    url = mcp_url(server.base_url, project.pk)

    def pieces(body: bytes):
        for _ in range(200):
            yield b" \n"
        yield body[:5]
        yield body[5:]

    ping = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}).encode()
    single = httpx2.post(url, content=pieces(ping), headers=headers)
    batch = httpx2.post(url, content=pieces(b"[" + ping + b"]"), headers=headers)

    assert (single.status_code, single.json()["result"]) == (200, {})
    assert batch.status_code == 400


def test_call_arguments_are_checked_before_anything_is_stored(server, users, project):
    """Arguments that are not the tool's schema are a tool error, and no conversation,
    message or turn record is stored for the call."""

    async def work(client):
        return await client.call_tool("list_files", {"path": "", "pad": "A" * 5000})

    refused = with_mcp(mcp_url(server.base_url, project.pk), secret_for(users["viewer"]), work)
    assert refused.is_error and "unexpected argument 'pad'" in text_of(refused)
    assert Message.objects.count() == 0 and TurnRecord.objects.count() == 0


def test_tools_of_your_own_are_not_served_unless_the_setting_allows(server_process, users, project):
    """Without ROJO_MCP_SERVE_USER_TOOLS, the registered `@rojo_tool` tools are neither
    listed nor run (an unknown tool, naming only what is served); the built-ins are."""
    plain = server_process(ROJO_TOOL_MODULES="tests.support.example_tools")

    async def work(client):
        listed = await client.list_tools()
        return listed, await client.call_tool("shout", {"text": "quiet"})

    listed, shout = with_mcp(mcp_url(plain.base_url, project.pk), secret_for(users["editor"]), work)
    assert [tool.name for tool in listed.tools] == BUILTIN_NAMES
    assert shout.is_error and text_of(shout).startswith("unknown tool 'shout'")
    assert "stamp_file" not in text_of(shout)
    assert Message.objects.count() == 0


def test_a_result_over_the_read_limit_is_paged_and_read_on_through_mcp(
    server_process, users, project
):
    """An outside agent gets the head, size and handle too, and reads on with read_result in
    the token's conversation."""
    paging = server_process(
        ROJO_TOOL_MODULES="tests.support.example_tools",
        ROJO_MCP_SERVE_USER_TOOLS="1",
        ROJO_MAX_READ_BYTES="1000",
    )
    text = "".join(f"line {n:05}\n" for n in range(500))  # 5,500 bytes

    async def work(client):
        paged = await client.call_tool("shout", {"text": text})
        handle = paged.structured_content["handle"]
        args = {"handle": handle, "offset": 2750, "length": 550}
        return paged, await client.call_tool("read_result", args)

    paged, part = with_mcp(mcp_url(paging.base_url, project.pk), secret_for(users["editor"]), work)

    assert not paged.is_error and paged.structured_content["size"] == 5500
    assert paged.structured_content["head"] == text.upper()[:1000]
    assert not part.is_error, text_of(part)
    assert part.structured_content == {
        "text": text.upper()[2750:3300],
        "offset": 2750,
        "end": 3300,
        "size": 5500,
    }


def test_a_call_reads_the_last_calls_messages_not_every_call_the_token_made(users, project):
    """A call loads the last call's messages of the token's conversation, to answer what a
    crash left open and number its own: not every call the token ever made, which grew by
    three messages a call and was read whole at each one (1.8 s a call after 30,000)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from rojos.mcp_endpoint.call_turns import call_begin_blocking, call_end_blocking
    from rojos.mcp_endpoint.caller import McpCaller

    made = api_token_create(user=users["editor"], name="agent")
    project_root_create(project.pk)
    conversation = Conversation.objects.create(
        project=project, user=users["editor"], via_mcp=True, via_token=made.token
    )
    for number in range(30):
        call = {"id": f"mcp_{number}", "type": "function"}
        call["function"] = {"name": "list_files", "arguments": "{}"}
        for position, fields in enumerate(
            [
                {"role": "user", "content": "MCP call: list_files"},
                {"role": "assistant", "tool_calls": [call]},
                {"role": "tool", "tool_call_id": call["id"], "name": "list_files", "content": "[]"},
            ]
        ):
            Message.objects.create(
                conversation=conversation, position=3 * number + position, **fields
            )
    caller = McpCaller(
        token_id=made.token.pk,
        token_name="agent",
        user_id=users["editor"].pk,
        read_only=False,
        project_id=project.pk,
    )

    with CaptureQueriesContext(connection) as queries:
        begun = call_begin_blocking(caller, "list_files", {"path": "."})
    call_end_blocking(begun)

    assert [m.position for m in begun.history.messages] == [87, 88, 89, 90, 91]
    assert [m.role for m in begun.history.messages[-2:]] == ["user", "assistant"]
    (loaded,) = [q["sql"] for q in queries if q["sql"].startswith('SELECT "rojos_message"')]
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute(f"EXPLAIN QUERY PLAN {loaded}")
            plan = [row[-1] for row in cursor.fetchall()]
        assert not [step for step in plan if step.startswith("SCAN")], plan
