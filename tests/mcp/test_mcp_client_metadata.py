"""Rojo's client ID metadata document (/connections/client-metadata.json) and how Connect makes
Rojo known to an MCP server's authorization server: the admin's credentials first, else the
document's URL as the client_id on an https site (the tests' django-oauth-toolkit provider
supports documents and fetches Rojo's from the app), else dynamic registration."""

import asyncio
from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

import pytest
from django.test import Client
from django.utils import timezone
from mcp.shared.auth import OAuthClientInformationFull

from rojos.mcp.accounts import AccountTokenStorage
from rojos.models import McpAccount, McpSignInPending
from tests.mcp.test_mcp_sign_in import signed_in, storage_thread_closed, whoami  # noqa: F401
from tests.support.helpers import audited
from tests.support.oauth_mcp import protected_server_row, provider_round_trip
from tests.support.oidc_server import CLIENT_ID

DOCUMENT = "/connections/client-metadata.json"
HTTPS_DOCUMENT = f"https://testserver{DOCUMENT}"
HTTPS_CALLBACK = "https://testserver/connections/callback/"
# A browser's request as the proxy that ends TLS passes it on (the Host it was sent to kept).
PROXIED = {"HTTP_X_FORWARDED_PROTO": "https", "HTTP_HOST": "testserver"}


@pytest.fixture
def behind_proxy(settings):
    """The site behind a proxy that ends TLS and says so in X-Forwarded-Proto."""
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")


def _query(location: str) -> dict[str, str]:
    return {key: values[0] for key, values in parse_qs(urlsplit(location).query).items()}


def test_the_document_names_the_url_it_is_served_at_and_the_callback(db):
    """Fetched over https with no login, as an authorization server fetches it."""
    answer = Client().get(DOCUMENT, secure=True)
    assert answer.status_code == 200
    assert answer["Content-Type"] == "application/json"
    document = answer.json()
    assert document["client_id"] == answer.wsgi_request.build_absolute_uri() == HTTPS_DOCUMENT
    assert document == {
        "client_id": HTTPS_DOCUMENT,
        "client_name": "Rojo Chat",
        "client_uri": "https://testserver/",
        "redirect_uris": [HTTPS_CALLBACK],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
    }
    # The SDK's own reading of a client record takes it as it is.
    client = OAuthClientInformationFull.model_validate(document)
    assert client.client_id == HTTPS_DOCUMENT and client.client_secret is None
    cache = {part.strip() for part in answer["Cache-Control"].split(",")}
    assert cache == {"public", "max-age=300"}


def test_behind_a_proxy_the_document_is_on_the_allowed_host_it_was_asked_for(db, settings):
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    settings.ALLOWED_HOSTS = ["chat.example.com"]
    proxied = {"HTTP_X_FORWARDED_PROTO": "https"}
    document = Client(HTTP_HOST="chat.example.com").get(DOCUMENT, **proxied).json()
    assert document["client_id"] == "https://chat.example.com/connections/client-metadata.json"
    assert document["redirect_uris"] == ["https://chat.example.com/connections/callback/"]
    # A host the admin did not allow gets no document naming it.
    stranger = Client(HTTP_HOST="evil.example.net").get(DOCUMENT, **proxied)
    assert stranger.status_code == 400 and b"evil.example.net" not in stranger.content


def test_over_plain_http_there_is_no_document(db, settings):
    """An http URL is no client_id (the draft, the SDK): nothing is published, and an
    X-Forwarded-Proto the proxy setting does not trust changes nothing."""
    assert Client().get(DOCUMENT).status_code == 404
    assert Client().get(DOCUMENT, HTTP_X_FORWARDED_PROTO="https").status_code == 404


def test_the_document_is_only_read(db):
    assert Client().post(DOCUMENT, secure=True).status_code == 405


@pytest.mark.django_db(transaction=True)
@pytest.mark.backend
def test_connect_on_an_https_site_signs_in_with_the_document_as_its_client_id(
    oauth_mcp, behind_proxy, project, users, root
):
    """No credentials set and a provider that supports documents: the authorization request
    names the document's URL as the client_id, and the provider, which knows no client of
    that id, fetches the document from the site to learn the redirect URI it then accepts.
    The member's calls act as their account."""
    tracker = protected_server_row(oauth_mcp, sign_in="person", preregistered=False)
    client = signed_in(users["editor"])
    start = client.post(f"/connections/{tracker.slug}/connect/", **PROXIED)
    assert start.status_code == 302, start
    asked = _query(start["Location"])
    assert asked["client_id"] == HTTPS_DOCUMENT
    assert asked["redirect_uri"] == HTTPS_CALLBACK
    back = provider_round_trip(client, start["Location"], username="alice")
    assert back.status_code == 302 and back["Location"] == "/connections/"
    assert "Your account on Tracker is connected." in client.get("/connections/").content.decode()
    assert whoami(tracker, users["editor"], root) == "account:alice"
    entry = audited().get(action="mcp_account_connected")
    assert entry.details["registration"] == "client_metadata_document"
    # A later session refreshes as the same client, with no document URL given to it.
    storage = AccountTokenStorage(server_id=tracker.pk, user_id=users["editor"].pk)
    assert asyncio.run(storage.get_client_info()).client_id == HTTPS_DOCUMENT
    before = asyncio.run(storage.get_tokens())
    McpAccount.objects.update(tokens_expire=timezone.now() - timedelta(minutes=1))
    assert whoami(tracker, users["editor"], root) == "account:alice"
    assert asyncio.run(storage.get_tokens()).access_token != before.access_token


@pytest.mark.django_db(transaction=True)
@pytest.mark.backend
def test_connect_on_an_http_site_offers_no_document_and_registers_dynamically(
    oauth_mcp, project, users
):
    """The same provider, the site on plain http: the SDK is not given the document, so it
    goes to dynamic registration, which this provider does not offer: the member is told."""
    tracker = protected_server_row(oauth_mcp, sign_in="person", preregistered=False)
    client = signed_in(users["editor"])
    answer = client.post(f"/connections/{tracker.slug}/connect/")
    assert answer.status_code == 302 and answer["Location"] == "/connections/"
    page = client.get("/connections/").content.decode()
    assert "its sign-in failed (OAuthRegistrationError)" in page
    assert not McpSignInPending.objects.exists()
    assert not McpAccount.objects.exclude(tokens=b"").exists()


@pytest.mark.django_db(transaction=True)
@pytest.mark.backend
def test_the_admins_credentials_win_over_the_document(oauth_mcp, behind_proxy, project, users):
    tracker = protected_server_row(oauth_mcp, sign_in="person")
    client = signed_in(users["editor"])
    start = client.post(f"/connections/{tracker.slug}/connect/", **PROXIED)
    assert start.status_code == 302, start
    assert _query(start["Location"])["client_id"] == CLIENT_ID
    back = provider_round_trip(client, start["Location"], username="alice")
    assert back.status_code == 302 and back["Location"] == "/connections/"
    entry = audited().get(action="mcp_account_connected")
    assert entry.details["registration"] == "preregistered"
