"""An MCP server's OAuth metadata cannot make Rojo request an internal address: its
authorization server, registration and token endpoints are reached on an internal address
only when they are on the server's own host or an admin allowed them
(ROJO_MCP_OAUTH_INTERNAL_ALLOWED). A refusal is told to the person at Connect (never a 500),
and nothing, neither a token nor a secret, reaches the refused host.

The MCP servers here run on 127.0.0.1, the host their admin named; a peer on 127.0.0.2 stands
for another host on an internal network (a cloud's metadata service, the app's Redis).
"""

import asyncio
import ipaddress
import secrets
from datetime import timedelta

import pytest
from asgiref.sync import SyncToAsync
from django.db import connections
from django.test import Client
from django.utils import timezone

from rojos.mcp import destinations
from rojos.mcp.accounts import AccountTokenStorage
from rojos.mcp.connect.pending import pending_store
from rojos.mcp.destinations import address_internal
from rojos.mcp.sealed import seal
from rojos.models import McpAccount, McpServer, McpSignInPending
from tests.mcp.test_mcp_sign_in import connect, whoami
from tests.support.http_peers import http_peer, http_proxy, metadata_server
from tests.support.oauth_mcp import protected_server_row

pytestmark = pytest.mark.backend
needs_db = pytest.mark.django_db(transaction=True)

REFUSED = "its sign-in names a host on an internal network"


@pytest.fixture(autouse=True)
def storage_thread_closed():
    yield
    SyncToAsync.single_thread_executor.submit(connections.close_all).result(timeout=10)


@pytest.fixture
def server():
    """The MCP server the admin added, on 127.0.0.1."""
    with http_peer("127.0.0.1") as peer:
        yield peer


@pytest.fixture
def internal():
    """A host on the internal network that no admin named."""
    with http_peer("127.0.0.2") as peer:
        yield peer


def server_row(url: str, **fields) -> McpServer:
    return McpServer.objects.create(
        name="Tracker", slug="tracker", transport="http", url=url, sign_in="person", **fields
    )


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def connect_message(client: Client) -> str:
    """Press Connect: it answers a redirect back to the page (never a 500); the page's text."""
    answer = client.post("/connections/tracker/connect/")
    assert answer.status_code == 302 and answer["Location"] == "/connections/"
    return client.get("/connections/").content.decode()


@needs_db
def test_an_authorization_server_on_an_internal_address_is_reached_only_once_allowed(
    server, internal, project, users, settings
):
    """The server's metadata names an authorization server on 127.0.0.2: Connect is refused
    with a message that names neither host, and 127.0.0.2 hears nothing; once an admin
    lists its network, Connect asks it for its metadata."""
    server_row(metadata_server(server, authorization_server=internal.base_url))
    client = signed_in(users["editor"])

    page = connect_message(client)

    assert internal.seen == []
    assert f"Connecting to &#x27;Tracker&#x27; failed: {REFUSED}" in page
    assert "ROJO_MCP_OAUTH_INTERNAL_ALLOWED" in page
    assert "127.0.0." not in page
    assert [seen.path for seen in server.seen][-1] == "/.well-known/oauth-protected-resource/mcp"
    assert not McpSignInPending.objects.exists()

    settings.ROJO_MCP_OAUTH_INTERNAL_ALLOWED = ["127.0.0.2/32"]
    connect_message(client)
    assert internal.seen and internal.seen[0].path.startswith("/.well-known/")


@needs_db
def test_a_registration_endpoint_on_an_internal_address_is_sent_nothing(
    server, internal, project, users
):
    """Without credentials (and, on http, no client ID metadata document) Rojo registers
    dynamically: at the endpoint the metadata names, which is on 127.0.0.2: refused."""
    register = f"{internal.base_url}/register"
    server_row(metadata_server(server, registration_endpoint=register))

    page = connect_message(signed_in(users["editor"]))

    assert internal.seen == []
    assert REFUSED in page
    assert "/.well-known/oauth-authorization-server" in [seen.path for seen in server.seen]


@needs_db
def test_a_token_endpoint_on_an_internal_address_is_refused_before_the_provider(
    server, internal, project, users
):
    """With the admin's credentials the flow would send the person to the provider, and
    the code with the client secret to the token endpoint at the callback: the person is
    told at Connect, not after the trip."""
    url = metadata_server(server, token_endpoint=f"{internal.base_url}/token")
    server_row(
        url,
        oauth_client_id="rojo",
        oauth_issuer=server.base_url,
        oauth_client_secret=seal(b"the-client-secret"),
    )

    page = connect_message(signed_in(users["editor"]))

    assert internal.seen == []
    assert REFUSED in page
    assert not McpSignInPending.objects.exists()


@needs_db
def test_the_code_and_client_secret_never_reach_a_token_endpoint_on_an_internal_address(
    server, internal, project, users
):
    """A sign-in under way whose token endpoint is internal (discovered before this rule,
    or its name resolving elsewhere since): the callback refuses the exchange and says so;
    127.0.0.2 never sees the code or the secret."""
    url = metadata_server(server)
    row = server_row(url, oauth_client_id="rojo", oauth_issuer=server.base_url)
    client = signed_in(users["editor"])
    client.get("/connections/")  # the login session's key
    state = secrets.token_urlsafe(16)
    pending_store(
        state=state,
        server_id=row.pk,
        user_id=users["editor"].pk,
        session_key=client.session.session_key,
        shared=False,
        flow=_flow(server.base_url, token_endpoint=f"{internal.base_url}/token"),
    )

    back = client.get("/connections/callback/", {"state": state, "code": "the-code"})

    assert internal.seen == []
    assert back.status_code == 302 and back["Location"] == "/connections/"
    assert REFUSED in client.get("/connections/").content.decode()
    assert not McpAccount.objects.exists()


def _flow(issuer: str, *, token_endpoint: str) -> dict:
    """What Connect keeps for the callback, as `AccountProvider` writes it."""
    metadata = {
        "issuer": issuer,
        "authorization_endpoint": f"{issuer}/authorize",
        "token_endpoint": token_endpoint,
        "response_types_supported": ["code"],
    }
    return {
        "verifier": "v" * 64,
        "redirect_uri": "http://testserver/connections/callback/",
        "scope": None,
        "protocol_version": None,
        "client": {
            "client_id": "rojo",
            "client_secret": "the-client-secret",
            "token_endpoint_auth_method": "client_secret_basic",
            "redirect_uris": ["http://testserver/connections/callback/"],
        },
        "client_metadata_url": None,
        "discovered": {"server": metadata, "server_url": issuer},
    }


@needs_db
def test_a_refresh_never_sends_the_refresh_token_to_an_internal_address(
    oauth_mcp, internal, project, users, root
):
    """A member connected through the real provider; the token endpoint kept from the
    sign-in now points at 127.0.0.2 (kept before this rule): the turn's refresh is refused,
    the model is told why, and the refresh token goes nowhere."""
    tracker = protected_server_row(oauth_mcp, sign_in="person")
    connect(signed_in(users["editor"]), tracker, account="alice")
    storage = AccountTokenStorage(server_id=tracker.pk, user_id=users["editor"].pk)
    discovered = asyncio.run(storage.get_discovered())
    discovered["server"]["token_endpoint"] = f"{internal.base_url}/o/token/"
    asyncio.run(storage.set_discovered(discovered))
    McpAccount.objects.update(tokens_expire=timezone.now() - timedelta(minutes=1))

    result = whoami(tracker, users["editor"], root)

    assert internal.seen == []
    assert REFUSED in result["error"]


@pytest.fixture
def resolver(monkeypatch):
    """Names resolved as the test says (the rest as the system does), through the one
    function the check and the connection use."""
    answers: dict[str, list[str]] = {}
    system = destinations.addresses_of

    async def addresses_of(host: str, port: int):
        if host in answers:
            return [ipaddress.ip_address(address) for address in answers[host]]
        return await system(host, port)

    monkeypatch.setattr(destinations, "addresses_of", addresses_of)
    return answers


@needs_db
def test_a_name_with_one_internal_address_among_public_ones_is_refused(
    server, internal, project, users, resolver
):
    """Every address a name resolves to is checked: one internal is enough."""
    port = internal.base_url.rsplit(":", 1)[1]
    resolver["auth.rojo-test.invalid"] = ["8.8.8.8", "127.0.0.2"]
    server_row(
        metadata_server(server, authorization_server=f"http://auth.rojo-test.invalid:{port}")
    )

    assert internal.seen == []
    assert REFUSED in connect_message(signed_in(users["editor"]))


@needs_db
def test_the_connection_goes_to_the_address_that_was_checked(
    server, internal, project, users, resolver, settings
):
    """The name is resolved once, by Rojo, and the connection made to that address (so a
    second answer cannot differ from the one checked): here a name only Rojo's resolution
    knows, allowed by its network, is reached at it, asked for by its name."""
    settings.ROJO_MCP_OAUTH_INTERNAL_ALLOWED = ["127.0.0.2"]
    port = internal.base_url.rsplit(":", 1)[1]
    resolver["auth.rojo-test.invalid"] = ["127.0.0.2"]
    server_row(
        metadata_server(server, authorization_server=f"http://auth.rojo-test.invalid:{port}")
    )

    connect_message(signed_in(users["editor"]))

    assert internal.seen
    assert internal.seen[0].headers["Host"] == f"auth.rojo-test.invalid:{port}"


@pytest.mark.parametrize(
    ("address", "internal"),
    [
        ("127.0.0.1", True),
        ("169.254.169.254", True),
        ("10.1.2.3", True),
        ("172.16.0.1", True),
        ("192.168.1.1", True),
        ("100.64.0.1", True),  # shared address space (carrier NAT)
        ("0.0.0.0", True),
        ("224.0.0.1", True),
        ("240.0.0.1", True),
        ("::1", True),
        ("::", True),
        ("fe80::1", True),
        ("fc00::1", True),
        ("fec0::1", True),
        ("ff02::1", True),
        ("::ffff:127.0.0.1", True),
        ("2002:a00:1::", True),  # 6to4 of 10.0.0.1
        ("64:ff9b::a9fe:a9fe", True),  # NAT64 of 169.254.169.254
        # Called global by Python before 3.11.10 (CVE-2024-4032): a cloud's metadata address,
        # and the 6to4 relays' anycast.
        ("192.0.0.192", True),
        ("192.88.99.1", True),
        ("198.18.0.1", True),  # benchmarking
        ("2001:db8::1", True),  # documentation
        ("64:ff9b:1::a9fe:a9fe", True),  # local-use NAT64
        ("8.8.8.8", False),
        ("203.0.114.1", False),
        ("2606:4700:4700::1111", False),
        ("::ffff:8.8.8.8", False),
    ],
)
def test_which_addresses_are_internal(address, internal):
    assert address_internal(ipaddress.ip_address(address)) is internal


@pytest.fixture
def egress_proxy(monkeypatch):
    """A forward proxy set in the environment, as an install behind one has it."""
    for name in ("no_proxy", "NO_PROXY", "all_proxy", "ALL_PROXY", "https_proxy", "HTTPS_PROXY"):
        monkeypatch.delenv(name, raising=False)
    with http_proxy() as proxy:
        monkeypatch.setenv("http_proxy", proxy.base_url)
        monkeypatch.setenv("HTTP_PROXY", proxy.base_url)
        yield proxy


@needs_db
def test_behind_an_egress_proxy_requests_go_through_it_and_are_still_checked(
    server, internal, project, users, egress_proxy, settings
):
    """An install that reaches out only through a proxy still reaches its MCP servers, and
    the metadata's internal host is refused before the proxy is asked for it; once an admin
    allows it, the proxy is asked."""
    url = metadata_server(server, authorization_server=internal.base_url)
    server_row(url)
    client = signed_in(users["editor"])

    page = connect_message(client)

    assert REFUSED in page
    asked = [seen.path for seen in egress_proxy.seen]
    assert url in asked  # the server itself, through the proxy
    assert not any(path.startswith(internal.base_url) for path in asked)
    assert internal.seen == []

    settings.ROJO_MCP_OAUTH_INTERNAL_ALLOWED = ["127.0.0.2/32"]
    connect_message(client)
    assert any(seen.path.startswith(internal.base_url) for seen in egress_proxy.seen)
    assert internal.seen
