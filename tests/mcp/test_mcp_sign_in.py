"""Members signing in to an MCP server that asks for OAuth, each as themselves: Connect
through a real authorization server (the tests' django-oauth-toolkit provider) and Rojo's
callback, every call acting as the turn's own member, never another's; Disconnect, and a
member's removal, deleting the tokens; connecting and disconnecting in the audit log."""

import asyncio
import json
from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

import httpx2
import pytest
from asgiref.sync import SyncToAsync, sync_to_async
from django.db import connection, connections
from django.forms.models import model_to_dict
from django.test import Client
from django.utils import timezone

from roject.audit.log import AuditActor
from roject.members.services import member_remove
from roject.models import AuditAction, AuditEntry, Role
from rojos.mcp.accounts import AccountTokenStorage, account_connected
from rojos.mcp.connect.flow import account_forget
from rojos.mcp.connect.provider import account_provider
from rojos.mcp.oauth import SignInNeeded
from rojos.mcp.pool import mcp_pool, mcp_pool_close
from rojos.mcp.spec import McpLink, ServerSpec
from rojos.mcp.tools import TurnTools
from rojos.models import McpAccount, McpServer, McpSignInPending
from rojos.tools import RojoToolContext, ToolCall, registry
from tests.support.helpers import audited
from tests.support.oauth_mcp import protected_server_row, provider_round_trip
from tests.support.oidc_server import CLIENT_ID, CLIENT_SECRET

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.backend]


@pytest.fixture(autouse=True)
def storage_thread_closed():
    """Queries made from the tools' event loop ran on asgiref's thread: its connection is
    closed with the test, so that the test database can be dropped."""
    yield
    SyncToAsync.single_thread_executor.submit(connections.close_all).result(timeout=10)


@pytest.fixture
def tracker(oauth_mcp, db):
    return protected_server_row(oauth_mcp, sign_in="person")


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def connect(client: Client, server, *, account: str):
    """Press Connect as the client's user and sign in at the provider as `account`."""
    start = client.post(f"/connections/{server.slug}/connect/")
    assert start.status_code == 302, start
    return provider_round_trip(client, start["Location"], username=account)


def whoami(server, user, root, tool: str = "whoami") -> dict:
    """A turn of `user` calls the server's `whoami` (or `tool`): the outcome, as the model
    reads it."""

    async def run():
        listed = tuple(server.listed_tools)
        if tool not in {offered["name"] for offered in listed}:
            listed += ({"name": tool, "inputSchema": {"type": "object"}},)
        link = McpLink(ServerSpec.of(server), None, False, listed, True)
        tools = TurnTools(registry, (link,))
        ctx = RojoToolContext(project_id=1, project_root=root, role=Role.EDITOR, user=user)
        try:
            await tools.prepare(ctx)
            outcome = await tools.run(ToolCall.parse("call_1", f"tracker__{tool}", {}), ctx)
        finally:
            await mcp_pool_close()
        return outcome.result

    return asyncio.run(run())


def test_two_members_connect_two_accounts_and_each_call_acts_as_its_member(
    tracker, oidc_provider, project, users, root
):
    """The editor signs in as the provider's alice, the owner as bob: each one's calls
    reach the server as their own account."""
    for member, account in (("editor", "alice"), ("owner", "bob")):
        client = signed_in(users[member])
        back = connect(client, tracker, account=account)
        assert back.status_code == 302 and back["Location"] == "/connections/"
        page = client.get("/connections/").content.decode()
        assert "Your account on Tracker is connected." in page
        assert 'class="disconnect"' in page
    assert whoami(tracker, users["editor"], root) == "account:alice"
    assert whoami(tracker, users["owner"], root) == "account:bob"
    assert whoami(tracker, users["editor"], root) == "account:alice"  # not the pool's last
    assert not McpSignInPending.objects.exists()  # each sign-in was used up


def test_a_member_who_has_not_connected_is_told_how_and_gets_no_one_elses_token(
    tracker, project, users, root
):
    connect(signed_in(users["editor"]), tracker, account="alice")
    result = whoami(tracker, users["viewer"], root)
    assert "has not connected" in result["error"]
    assert "/connections/#mcp-tracker" in result["error"]
    page = signed_in(users["viewer"]).get("/connections/").content.decode()
    assert 'id="mcp-tracker"' in page and "not connected" in page


def test_disconnecting_deletes_the_tokens_and_stops_the_calls(tracker, project, users, root):
    client = signed_in(users["editor"])
    connect(client, tracker, account="alice")
    assert whoami(tracker, users["editor"], root) == "account:alice"
    assert client.post("/connections/tracker/disconnect/").status_code == 302
    assert not McpAccount.objects.filter(user=users["editor"]).exists()
    assert "has not connected" in whoami(tracker, users["editor"], root)["error"]


def test_a_member_removed_from_their_last_project_loses_their_tokens(tracker, project, users, root):
    connect(signed_in(users["editor"]), tracker, account="alice")
    connect(signed_in(users["owner"]), tracker, account="bob")
    member_remove(by=users["owner"], project_id=project.pk, user_id=users["editor"].pk)
    assert not McpAccount.objects.filter(user=users["editor"]).exists()
    assert McpAccount.objects.filter(user=users["owner"]).exists()
    assert "has not connected" in whoami(tracker, users["editor"], root)["error"]
    assert system_disconnects() == [("tracker", "editor", "left their last project")]


def test_a_deactivated_member_loses_their_tokens(tracker, project, users):
    connect(signed_in(users["editor"]), tracker, account="alice")
    users["editor"].is_active = False
    users["editor"].save()
    assert not McpAccount.objects.filter(user=users["editor"]).exists()
    assert system_disconnects() == [("tracker", "editor", "deactivated")]
    users["editor"].save()  # saved again: nothing left to disconnect, nothing audited
    assert len(system_disconnects()) == 1


def refreshing_after(forget, *, tracker, user) -> tuple[list[str | None], bool]:
    """A session of `user` holding their tokens in memory; `forget` deletes the account
    (blocking), then the session's access token runs out and its next request refreshes it.
    The Authorization headers that reached the MCP server, and whether the request ended
    asking for a sign-in (nobody's browser is here)."""
    spec = ServerSpec.of(tracker)
    provider = account_provider(spec=spec, user_id=user.pk)
    sent = []

    async def record(request):
        if str(request.url) == spec.url:
            sent.append(request.headers.get("Authorization"))

    async def run():
        await provider._initialize()  # the session's tokens, in memory
        await sync_to_async(forget)()
        provider.context.token_expiry_time = 1  # ran out: the SDK refreshes first
        async with httpx2.AsyncClient(auth=provider, event_hooks={"request": [record]}) as http:
            await http.post(spec.url, json=PING, headers=MCP_ACCEPT)

    try:
        asyncio.run(run())
    except SignInNeeded:
        return sent, True
    return sent, False


PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
MCP_ACCEPT = {"Accept": "application/json, text/event-stream"}


def test_two_sessions_of_one_account_refresh_in_turn_and_both_go_on(tracker, project, users):
    """The member's sessions in two projects (or two server processes) hold the same tokens;
    once one refreshed (the refresh token rotated), the other's refresh is refused, and it
    goes on with the tokens the first stored, not told to connect again."""
    editor = users["editor"]
    connect(signed_in(editor), tracker, account="alice")
    spec = ServerSpec.of(tracker)
    storage = AccountTokenStorage(server_id=tracker.pk, user_id=editor.pk)
    before = asyncio.run(storage.get_tokens())

    async def run() -> list[int]:
        sessions = [account_provider(spec=spec, user_id=editor.pk) for _ in range(2)]
        for session in sessions:
            await session._initialize()
        answers = []
        for session in sessions:
            session.context.token_expiry_time = 1  # ran out for both
            async with httpx2.AsyncClient(auth=session) as http:
                answer = await http.post(spec.url, json=PING, headers=MCP_ACCEPT)
                answers.append(answer.status_code)
        return answers

    answers = asyncio.run(run())

    after = asyncio.run(storage.get_tokens())
    assert after.refresh_token != before.refresh_token  # refreshed once, rotated
    assert 401 not in answers  # both reached the server signed in
    assert account_connected(server_id=tracker.pk, user_id=editor.pk)


def test_a_disconnect_is_not_undone_by_a_session_refreshing_its_tokens(
    tracker, project, users, root
):
    """The refresh is dropped: no account comes back, and the call goes out signed out."""
    editor = users["editor"]
    connect(signed_in(editor), tracker, account="alice")

    def disconnect():
        spec = ServerSpec.of(tracker)
        account_forget(spec=spec, user_id=editor.pk, actor=AuditActor(user=editor))

    sent, signed_out = refreshing_after(disconnect, tracker=tracker, user=editor)
    assert not account_connected(server_id=tracker.pk, user_id=editor.pk)
    assert not McpAccount.objects.exists()
    assert sent and not any(sent)  # the refreshed token never reached the server
    assert signed_out
    assert "has not connected" in whoami(tracker, editor, root)["error"]


@pytest.mark.parametrize("way_out", ["deactivated", "left their last project"])
def test_a_member_removed_stays_signed_out_though_a_session_refreshes(
    tracker, project, users, way_out
):
    editor = users["editor"]
    connect(signed_in(editor), tracker, account="alice")

    def remove():
        if way_out == "deactivated":
            editor.is_active = False
            editor.save()
        else:
            member_remove(by=users["owner"], project_id=project.pk, user_id=editor.pk)

    sent, signed_out = refreshing_after(remove, tracker=tracker, user=editor)
    assert not McpAccount.objects.exists()
    assert sent and not any(sent) and signed_out
    assert system_disconnects() == [("tracker", "editor", way_out)]


def test_a_member_removed_has_their_sessions_stopped(tracker, project, users, root):
    """Deactivation stops the person's pooled sessions of the server (as a Disconnect
    does), and leaves another member's running."""
    connect(signed_in(users["editor"]), tracker, account="alice")
    connect(signed_in(users["owner"]), tracker, account="bob")
    spec = ServerSpec.of(tracker)

    async def run():
        pool = mcp_pool()
        editors = pool.connection(spec, root, users["editor"].pk)
        owners = pool.connection(spec, root, users["owner"].pk)
        try:
            for connection in (editors, owners):
                assert await connection.call("whoami", {}) is not None
            await sync_to_async(deactivate)(users["editor"])
            for _ in range(100):  # the stop is handed to the loop, and the session ends
                if not editors.running:
                    break
                await asyncio.sleep(0.05)
            return editors.running, owners.running
        finally:
            await mcp_pool_close()

    assert asyncio.run(run()) == (False, True)


def deactivate(user) -> None:
    user.is_active = False
    user.save()


def system_disconnects() -> list[tuple[str, str, str]]:
    """The disconnects the system audited (no person acted): server, member, why."""
    entries = AuditEntry.objects.filter(
        action=AuditAction.MCP_ACCOUNT_DISCONNECTED, actor_kind=AuditEntry.ActorKind.SYSTEM
    ).order_by("pk")
    return [(e.details["server"], e.details["member"], e.details["why"]) for e in entries]


def test_the_stored_tokens_are_sealed_in_the_database(tracker, project, users):
    connect(signed_in(users["editor"]), tracker, account="alice")
    storage = AccountTokenStorage(server_id=tracker.pk, user_id=users["editor"].pk)
    tokens = asyncio.run(storage.get_tokens())
    assert tokens is not None and tokens.access_token
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT tokens, client, discovered FROM {McpAccount._meta.db_table}")
        stored = b"".join(str(value).encode() for row in cursor.fetchall() for value in row)
    assert tokens.access_token.encode() not in stored
    assert tokens.refresh_token and tokens.refresh_token.encode() not in stored


def test_a_callback_with_another_sessions_state_connects_nothing(tracker, project, users):
    """The state the provider brings back is honoured only in the session that began it,
    for its own user, once."""
    started = signed_in(users["editor"]).post("/connections/tracker/connect/")
    state = parse_qs(urlsplit(started["Location"]).query)["state"][0]
    for intruder in (signed_in(users["owner"]), signed_in(users["editor"])):
        answer = intruder.get("/connections/callback/", {"state": state, "code": "stolen"})
        assert answer.status_code == 302
        page = intruder.get("/connections/").content.decode()
        assert "not one you started here" in page
    assert not McpAccount.objects.exclude(tokens=b"").exists()


def test_connect_refuses_a_get_and_a_stranger(tracker, project, users):
    client = signed_in(users["editor"])
    assert client.get("/connections/tracker/connect/").status_code == 405
    assert Client().post("/connections/tracker/connect/").status_code == 302  # to the login
    assert client.post("/connections/nothing/connect/").status_code == 404
    csrf = Client(enforce_csrf_checks=True)
    csrf.force_login(users["editor"])
    assert csrf.post("/connections/tracker/connect/").status_code == 403
    assert not McpSignInPending.objects.exists()


def test_an_account_that_is_a_member_of_no_project_cannot_connect(tracker, project, users):
    """A server is used in projects' turns: someone in none has no use for an account on it,
    and one made would stay, as nothing removes it (only leaving the last project does)."""
    refused = signed_in(users["outsider"]).post("/connections/tracker/connect/")
    assert refused.status_code == 403
    assert not McpSignInPending.objects.exists()


def test_a_sign_in_finished_after_leaving_the_last_project_connects_nothing(
    tracker, project, users
):
    """Removed from their last project while at the provider, the person comes back to a
    refusal: the removal deleted their accounts, and the callback makes none."""
    client = signed_in(users["editor"])
    started = client.post("/connections/tracker/connect/")
    member_remove(by=users["owner"], project_id=project.pk, user_id=users["editor"].pk)

    answer = provider_round_trip(client, started["Location"], username="alice")

    assert answer.status_code == 403
    assert not McpAccount.objects.filter(user=users["editor"]).exists()


def test_a_shared_connection_signed_in_by_an_admin_acts_for_every_member(
    oauth_mcp, project, users, root
):
    """A superuser connects the shared account once (from the server's admin page); every
    member's calls act as it, and a member cannot connect or disconnect it."""
    shared = protected_server_row(oauth_mcp, sign_in="shared")
    member = signed_in(users["editor"])
    assert member.post("/connections/tracker/connect/", {"shared": "1"}).status_code == 403
    result = whoami(shared, users["editor"], root)
    assert "shared connection that no admin has signed in" in result["error"]

    users["owner"].is_superuser = users["owner"].is_staff = True
    users["owner"].save()
    admin = signed_in(users["owner"])
    change = admin.get(f"/admin/rojos/mcpserver/{shared.pk}/change/").content.decode()
    assert "not signed in" in change and 'form="mcp-shared"' in change
    assert '<form id="mcp-shared" method="post" hidden>' in change
    start = admin.post("/connections/tracker/connect/", {"shared": "1"})
    back = provider_round_trip(admin, start["Location"], username="bob")
    assert back.status_code == 302 and back["Location"] == "/admin/rojos/mcpserver/"
    assert McpAccount.objects.get().user is None

    assert whoami(shared, users["editor"], root) == "account:bob"
    assert whoami(shared, users["viewer"], root) == "account:bob"
    assert member.post("/connections/tracker/disconnect/", {"shared": "1"}).status_code == 403
    assert McpAccount.objects.filter(user=None).exists()


def test_a_token_a_server_quotes_in_its_error_reaches_no_member_nor_model(
    oauth_mcp, project, users, root
):
    """The shared account's access token stands in for a fixed header, and is scrubbed as
    one's value is: quoted back, it would reach every member, the history and the model."""
    shared = protected_server_row(oauth_mcp, sign_in="shared")
    users["owner"].is_superuser = users["owner"].is_staff = True
    users["owner"].save()
    admin = signed_in(users["owner"])
    start = admin.post("/connections/tracker/connect/", {"shared": "1"})
    assert provider_round_trip(admin, start["Location"], username="bob").status_code == 302
    tokens = asyncio.run(AccountTokenStorage(server_id=shared.pk, user_id=None).get_tokens())

    result = whoami(shared, users["editor"], root, tool="quote_token")

    assert "may not do that" in result["error"] and "***" in result["error"]
    assert tokens.access_token not in result["error"]
    assert tokens.access_token[4:-4] not in result["error"]


def test_a_shared_sign_in_finished_by_someone_no_longer_a_superuser_connects_nothing(
    oauth_mcp, project, users
):
    """The shared account acts for every member: a superuser who loses the right while at
    the provider comes back to a refusal, not a shared connection of their making."""
    protected_server_row(oauth_mcp, sign_in="shared")
    admin_user = users["owner"]
    admin_user.is_superuser = admin_user.is_staff = True
    admin_user.save()
    admin = signed_in(admin_user)
    start = admin.post("/connections/tracker/connect/", {"shared": "1"})
    admin_user.is_superuser = False
    admin_user.save()

    back = provider_round_trip(admin, start["Location"], username="bob")

    assert back.status_code == 403
    assert not McpAccount.objects.exclude(tokens=b"").exists()


def test_an_expired_token_is_refreshed_by_the_sdk_in_a_later_process(tracker, project, users, root):
    """A stored access token past its time (read by a new session, as another process
    would) is refreshed at the authorization server found at sign-in, not asked for again."""
    connect(signed_in(users["editor"]), tracker, account="alice")
    storage = AccountTokenStorage(server_id=tracker.pk, user_id=users["editor"].pk)
    before = asyncio.run(storage.get_tokens())
    McpAccount.objects.update(tokens_expire=timezone.now() - timedelta(minutes=1))
    assert whoami(tracker, users["editor"], root) == "account:alice"
    after = asyncio.run(storage.get_tokens())
    assert after.access_token != before.access_token
    assert McpAccount.objects.get().tokens_expire > timezone.now()


def test_connect_to_a_server_that_cannot_be_reached_says_so(project, users):
    McpServer.objects.create(
        name="Down", slug="down", transport="http", url="http://127.0.0.1:9/mcp", sign_in="person"
    )
    client = signed_in(users["editor"])
    answer = client.post("/connections/down/connect/")
    assert answer.status_code == 302 and answer["Location"] == "/connections/"
    page = client.get("/connections/").content.decode()
    assert "Connecting to &#x27;Down&#x27; failed: it cannot be reached." in page
    assert "127.0.0.1:9" not in page
    assert not McpSignInPending.objects.exists()


def test_client_credentials_go_to_no_authorization_server_but_their_own(oauth_mcp, project, users):
    """Registered with another issuer than the one the server names (a server pointing its
    metadata elsewhere), the admin's client credentials are dropped: no sign-in starts with
    them, and the person is told the sign-in failed."""
    protected_server_row(oauth_mcp, sign_in="person", oauth_issuer="https://auth.example.com")
    client = signed_in(users["editor"])
    answer = client.post("/connections/tracker/connect/")
    assert answer.status_code == 302 and answer["Location"] == "/connections/"
    page = client.get("/connections/").content.decode()
    assert "Connecting to &#x27;Tracker&#x27; failed: its sign-in failed" in page
    assert not McpSignInPending.objects.exists() and not McpAccount.objects.exists()


def _entries(*actions: str) -> list[tuple]:
    """(action, actor, object, details) of the audit entries of `actions`, oldest first."""
    found = audited().filter(action__in=actions).order_by("at", "pk")
    return [(e.action, e.actor_name, e.object_repr, e.details) for e in found]


def _no_secret_in_the_log(*secrets: str) -> None:
    written = json.dumps([model_to_dict(entry) for entry in audited()], default=str)
    for secret in secrets:
        assert secret not in written


def test_a_member_connecting_and_disconnecting_is_audited(tracker, project, users):
    """One entry each, by the member, naming the server and their own account, and how Rojo
    was known to the provider; no token, secret or client ID in them."""
    client = signed_in(users["editor"])
    connect(client, tracker, account="alice")
    tokens = asyncio.run(
        AccountTokenStorage(server_id=tracker.pk, user_id=users["editor"].pk).get_tokens()
    )
    own = {"server": "tracker", "account": "own"}
    assert _entries("mcp_account_connected") == [
        ("mcp_account_connected", "editor", "Tracker", {**own, "registration": "preregistered"})
    ]
    assert client.post("/connections/tracker/disconnect/").status_code == 302
    assert client.post("/connections/tracker/disconnect/").status_code == 302  # nothing left
    assert _entries("mcp_account_connected", "mcp_account_disconnected")[1:] == [
        ("mcp_account_disconnected", "editor", "Tracker", own)
    ]
    for entry in audited():
        assert (entry.object_type, entry.object_id) == ("rojos.mcpserver", str(tracker.pk))
        assert entry.address == "127.0.0.1" and entry.project_id is None
    _no_secret_in_the_log(tokens.access_token, tokens.refresh_token, CLIENT_SECRET, CLIENT_ID)


def test_an_admin_connecting_and_disconnecting_the_shared_account_is_audited(
    oauth_mcp, project, users
):
    protected_server_row(oauth_mcp, sign_in="shared")
    users["owner"].is_superuser = users["owner"].is_staff = True
    users["owner"].save()
    admin = signed_in(users["owner"])
    start = admin.post("/connections/tracker/connect/", {"shared": "1"})
    provider_round_trip(admin, start["Location"], username="bob")
    assert admin.post("/connections/tracker/disconnect/", {"shared": "1"}).status_code == 302
    shared = {"server": "tracker", "account": "shared"}
    assert _entries("mcp_account_connected", "mcp_account_disconnected") == [
        ("mcp_account_connected", "owner", "Tracker", {**shared, "registration": "preregistered"}),
        ("mcp_account_disconnected", "owner", "Tracker", shared),
    ]


def test_a_failed_sign_in_is_not_audited_as_a_connection(tracker, project, users):
    client = signed_in(users["editor"])
    started = client.post("/connections/tracker/connect/")
    state = parse_qs(urlsplit(started["Location"]).query)["state"][0]
    client.get("/connections/callback/", {"state": state, "code": "made-up"})
    assert (
        "Connecting to &#x27;Tracker&#x27; failed" in client.get("/connections/").content.decode()
    )
    assert _entries("mcp_account_connected") == []
