"""A server's tokens stay with the server they were issued for: when an admin moves an MCP
server's URL to another scheme, host or port, or changes how it signs in, its accounts
(members' and the shared one) and the sign-ins under way are deleted, and the change is
audited; a token whose discovered resource no longer covers the server's URL is never sent,
however the URL was changed."""

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.urls import reverse

from rojos.mcp.sealed import seal
from rojos.models import McpAccount, McpServer, McpSignInPending
from tests.mcp.test_mcp_sign_in import (  # noqa: F401 (a fixture, used by name)
    connect,
    signed_in,
    storage_thread_closed,
    whoami,
)
from tests.support.helpers import audited
from tests.support.oauth_mcp import protected_server_row
from tests.support.oidc_server import CLIENT_ID

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.backend]


class _Recorder(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Recording)
        self.authorizations: list[str | None] = []
        self.headers: list[dict[str, str]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/mcp"


class _Recording(BaseHTTPRequestHandler):
    """Keeps every request's headers and answers 404: a host no one meant."""

    def _answer(self) -> None:
        self.server.authorizations.append(self.headers.get("Authorization"))
        self.server.headers.append({name.lower(): value for name, value in self.headers.items()})
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_POST = do_DELETE = _answer

    def log_message(self, format, *args) -> None:
        """Nothing on stderr."""


@contextmanager
def recording_server() -> Iterator[_Recorder]:
    server = _Recorder()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def tracker(oauth_mcp, db):
    return protected_server_row(oauth_mcp, sign_in="person")


def change_form(server: McpServer, **fields) -> dict:
    """The server's change form as an admin posts it with nothing changed, then `fields`."""
    data = {
        "name": server.name,
        "slug": server.slug,
        "transport": server.transport,
        "command": "",
        "args": "[]",
        "env_from": "{}",
        "set_env": "",
        "url": server.url,
        "headers_from": "{}",
        "set_headers": "",
        "sign_in": server.sign_in,
        "oauth_client_id": server.oauth_client_id,
        "oauth_issuer": server.oauth_issuer,
        "set_oauth_client_secret": "",
    }
    return {**data, **fields}


def admin_change(admin_client, server: McpServer, **fields):
    url = reverse("admin:rojos_mcpserver_change", args=[server.pk])
    response = admin_client.post(url, change_form(server, **fields))
    assert response.status_code == 302, response.content.decode()[:2000]
    server.refresh_from_db()
    return response


def test_a_member_token_never_reaches_the_host_an_admin_moved_the_server_to(
    tracker, admin_client, project, users, root
):
    """The reviewer's case: connected, the URL moved in the admin, and the next call sends
    no bearer token to the new host; the member is asked to connect again."""
    connect(signed_in(users["editor"]), tracker, account="alice")
    assert whoami(tracker, users["editor"], root) == "account:alice"
    with recording_server() as elsewhere:
        admin_change(admin_client, tracker, url=elsewhere.url)
        result = whoami(tracker, users["editor"], root)
    assert elsewhere.authorizations == []  # asked nothing: the member has no account there
    assert "has not connected" in result["error"]
    assert not McpAccount.objects.exists()


def test_moving_a_server_deletes_every_account_and_sign_in_and_is_audited(
    tracker, admin_client, project, users
):
    """Members' accounts, the shared one and a sign-in under way all go; the server's change
    entry says so (how many, never a token), and the admin is told."""
    connect(signed_in(users["editor"]), tracker, account="alice")
    McpAccount.objects.create(server=tracker, user=None, tokens=seal(b"{}"))  # a shared one
    assert signed_in(users["viewer"]).post("/connections/tracker/connect/").status_code == 302
    assert McpAccount.objects.count() == 2 and McpSignInPending.objects.count() == 1

    response = admin_change(admin_client, tracker, url="https://tracker.example.net/mcp")

    assert not McpAccount.objects.exists() and not McpSignInPending.objects.exists()
    entry = audited().get(action="mcp_server_changed")
    assert sorted(entry.details["fields"]) == ["accounts", "url"]
    assert entry.details["accounts_removed"] == 2
    assert "tracker.example.net" not in str(entry.details) and CLIENT_ID not in str(entry.details)
    shown = admin_client.get(response["Location"]).content.decode()
    assert "The connected accounts on Tracker were removed (2)" in shown


@pytest.mark.parametrize(
    "url",
    ["https://127.0.0.1/mcp", "http://localhost:{port}/mcp", "http://127.0.0.1:9/mcp"],
    ids=["scheme", "host", "port"],
)
def test_another_scheme_host_or_port_deletes_the_accounts(
    tracker, admin_client, project, users, url
):
    connect(signed_in(users["editor"]), tracker, account="alice")
    port = tracker.url.split(":")[2].split("/")[0]
    admin_change(admin_client, tracker, url=url.format(port=port))
    assert not McpAccount.objects.exists()


def test_another_path_or_another_field_keeps_the_accounts(tracker, admin_client, project, users):
    connect(signed_in(users["editor"]), tracker, account="alice")
    admin_change(admin_client, tracker, url=tracker.url + "/v2", name="Issues")
    assert McpAccount.objects.filter(user=users["editor"]).exists()
    entry = audited().get(action="mcp_server_changed")
    assert "accounts" not in entry.details["fields"]


def test_changing_how_a_server_signs_in_deletes_the_accounts(tracker, admin_client, project, users):
    connect(signed_in(users["editor"]), tracker, account="alice")
    admin_change(admin_client, tracker, sign_in="shared")
    assert not McpAccount.objects.exists()
    admin_change(admin_client, tracker, sign_in="person")  # and back: nothing comes back
    assert not McpAccount.objects.exists()


def test_a_token_is_not_sent_where_its_resource_does_not_cover_the_url(
    tracker, project, users, root
):
    """Defence in depth: a URL changed without the admin (a script, the shell) keeps the
    rows, and still no stored token goes to the new host."""
    connect(signed_in(users["editor"]), tracker, account="alice")
    with recording_server() as elsewhere:
        McpServer.objects.filter(pk=tracker.pk).update(url=elsewhere.url)
        tracker.refresh_from_db()
        result = whoami(tracker, users["editor"], root)
    assert elsewhere.authorizations  # it was asked, with no token
    assert not any(elsewhere.authorizations)
    assert "could not be started" in result["error"]


def test_a_stored_header_does_not_follow_the_server_to_another_host(
    admin_client, project, users, root
):
    """A header stored write-only (a key the admin can no longer read) was meant for the
    server's host: moved to another one, the server sends it nowhere, as a rojo's stored
    key is removed; the admin is told, and the change entry names the header."""
    with recording_server() as meant, recording_server() as elsewhere:
        server = McpServer.objects.create(
            name="Tracker",
            slug="tracker",
            transport=McpServer.Transport.HTTP,
            url=meant.url,
            listed_tools=[{"name": "whoami", "inputSchema": {"type": "object"}}],
        )
        admin_change(admin_client, server, set_headers="X-Tracker-Key=s3cret-key")
        whoami(server, users["editor"], root)
        assert meant.headers and all(h["x-tracker-key"] == "s3cret-key" for h in meant.headers)

        response = admin_change(admin_client, server, url=elsewhere.url)
        whoami(server, users["editor"], root)

    assert elsewhere.headers  # it was asked, without the key
    assert not any("x-tracker-key" in headers for headers in elsewhere.headers)
    assert server.headers == {}
    entry = audited().filter(action="mcp_server_changed").latest("pk")
    assert entry.details["headers"] == ["X-Tracker-Key"] and "s3cret" not in str(entry.details)
    shown = admin_client.get(response["Location"]).content.decode()
    assert "stored headers of Tracker were removed (X-Tracker-Key)" in shown


def test_a_header_set_with_the_move_or_a_path_change_keeps_it(admin_client, project, users):
    """The admin who gives the header again with the new URL means it for the new host; a
    path on the same host keeps the stored ones."""
    server = McpServer.objects.create(
        name="Tracker",
        slug="tracker",
        transport=McpServer.Transport.HTTP,
        url="https://tracker.example.com/mcp",
        headers={"X-Tracker-Key": "old", "X-Team": "red"},
    )
    admin_change(admin_client, server, url="https://tracker.example.com/mcp/v2")
    assert server.headers == {"X-Tracker-Key": "old", "X-Team": "red"}
    admin_change(
        admin_client, server, url="https://issues.example.net/mcp", set_headers="X-Team=blue"
    )
    assert server.headers == {"X-Team": "blue"}
