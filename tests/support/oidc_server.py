"""A real OpenID Connect provider for the tests (django-oauth-toolkit,
tests/support/oidc_provider/), in a process of its own on a free port, and the app configured
to sign in with it.

`oidc_provider` starts it once per session with a confidential client whose redirect URIs
are the test client's (http:// and https://testserver) and the live server's; it also knows
clients by their client ID metadata document, fetched from the live server
(oidc_provider/cimd.py). `oidc` points the app at it for one test and gives the provider's
users back their default claims.
"""

import html
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, urljoin, urlsplit

import pytest
import requests
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from django.conf import settings as django_settings

from tests.support.server_process import _free_port, listens

CLIENT_ID = "rojo-chat-tests"
CLIENT_SECRET = "rojo-chat-tests-secret"
LABEL = "Test provider"
GROUP_ROLES = [("docs-editors", "docs", "editor"), ("docs-admins", "docs", "owner")]
USERS = {
    "alice": {
        "password": "alice-provider-pass",
        "email": "alice@example.com",
        "given_name": "Alice",
        "family_name": "Liddell",
        "groups": ["docs-editors"],
    },
    "bob": {
        "password": "bob-provider-pass",
        "email": "bob@example.com",
        "groups": ["docs-admins", "docs-editors", "unmapped"],
    },
    # Only for refusing consent: never allows the app, so the provider always asks.
    "erin": {"password": "erin-provider-pass", "email": "erin@example.com", "groups": []},
    # Claims an address the provider never checked: a takeover attempt on the app's owner.
    "mallory": {
        "password": "mallory-provider-pass",
        "email": "owner@example.com",
        "email_verified": False,
        "groups": [],
    },
}


@dataclass
class Provider:
    """The running provider: its base URL, its users file, its process."""

    base_url: str
    users_path: Path
    process: subprocess.Popen
    log_path: Path

    @property
    def discovery_url(self) -> str:
        return f"{self.base_url}/o/.well-known/openid-configuration"

    def users_reset(self, **changes: dict) -> None:
        """The default users, with `changes` merged into the named users' claims."""
        users = {name: {**claims, **changes.get(name, {})} for name, claims in USERS.items()}
        self.users_path.write_text(json.dumps(users))


def _rsa_key_pem() -> str:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()


def _wait_ready(provider: Provider) -> None:
    deadline = time.monotonic() + 90
    while True:
        if provider.process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("the OIDC provider did not start:\n" + provider.log_path.read_text())
        try:
            answered = requests.get(provider.discovery_url, timeout=1).status_code
        except (requests.ConnectionError, requests.Timeout):  # not listening, or still busy
            answered = None
        port = int(provider.base_url.rsplit(":", 1)[1])
        if answered == 200 and listens(pid=provider.process.pid, port=port):
            return  # its own, not another worker's provider handed the same port
        time.sleep(0.2)


@pytest.fixture(scope="session")
def oidc_provider(asgi_server, tmp_path_factory) -> Iterator[Provider]:
    """django-oauth-toolkit's OIDC provider in its own process, for the whole session."""
    workdir = tmp_path_factory.mktemp("oidc-provider")
    (workdir / "key.pem").write_text(_rsa_key_pem())
    sites = ["http://testserver", "https://testserver", asgi_server]
    client = {
        "client_id": CLIENT_ID,
        "client_secret": CLIENT_SECRET,
        # The app's sign-in, and its MCP servers' Connect (tests/support/oauth_mcp.py).
        "redirect_uris": [
            f"{site}{path}"
            for site in sites
            for path in ("/oidc/callback/", "/connections/callback/")
        ],
        "post_logout_redirect_uris": [f"{site}/login/" for site in sites],
    }
    (workdir / "client.json").write_text(json.dumps(client))
    port = _free_port()
    env = {
        **os.environ,
        "OIDC_PROVIDER_DB": str(workdir / "provider.sqlite3"),
        "OIDC_PROVIDER_KEY": str(workdir / "key.pem"),
        "OIDC_PROVIDER_USERS": str(workdir / "users.json"),
        "OIDC_PROVIDER_CLIENT": str(workdir / "client.json"),
        # Where the provider fetches the client ID metadata document of https://testserver/
        # (oidc_provider/cimd.py).
        "OIDC_PROVIDER_SITE": asgi_server,
    }
    log_path = workdir / "provider.log"
    with log_path.open("w") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.support.oidc_provider.serve", str(port)],
            cwd=django_settings.BASE_DIR,
            env=env,
            stdout=log,
            stderr=log,
        )
    provider = Provider(f"http://127.0.0.1:{port}", workdir / "users.json", process, log_path)
    provider.users_reset()
    try:
        _wait_ready(provider)
        yield provider
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.fixture
def oidc(oidc_provider, settings) -> Provider:
    """The app signs in with the test provider (group roles mapped on project `docs`)."""
    from roject.identity.oidc.config import oidc_discovery_forget

    oidc_provider.users_reset()
    oidc_discovery_forget()
    settings.ROJO_OIDC_DISCOVERY_URL = oidc_provider.discovery_url
    settings.ROJO_OIDC_CLIENT_ID = CLIENT_ID
    settings.ROJO_OIDC_CLIENT_SECRET = CLIENT_SECRET
    settings.ROJO_OIDC_GROUP_ROLES = GROUP_ROLES
    settings.ROJO_OIDC_BUTTON_LABEL = LABEL
    return oidc_provider


def _consent(idp: requests.Session, page: requests.Response) -> requests.Response:
    """Allow the client on the provider's consent page: its form's hidden fields, posted."""
    fields = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', page.text))
    fields = {name: html.unescape(value) for name, value in fields.items()}
    return idp.post(page.url, data={**fields, "allow": "Authorize"}, allow_redirects=False)


def _log_in(idp: requests.Session, page: requests.Response, username: str) -> requests.Response:
    """Fill the provider's login page as `username`."""
    assert "Provider password" in page.text, page.text
    data = {
        "username": username,
        "password": USERS[username]["password"],
        "csrfmiddlewaretoken": idp.cookies["provider_csrftoken"],
    }
    return idp.post(page.url, data=data, allow_redirects=False)


def provider_sign_in(
    client, *, username: str, idp: requests.Session | None = None, next_url: str = ""
) -> tuple[object, requests.Session]:
    """Sign in to the app with the provider, as a browser would, with Django's test client
    for the app and `idp` (a fresh session unless given) for the provider: its login page
    filled and consent given when it asks. (The callback's response, the provider session.)"""
    idp = idp or requests.Session()
    start = client.get("/oidc/authenticate/", {"next": next_url} if next_url else {})
    assert start.status_code == 302, start
    response = idp.get(start["Location"], allow_redirects=False)
    for _ in range(8):
        if response.is_redirect:
            location = urljoin(response.url, response.headers["Location"])
            callback = urlsplit(location)
            if callback.netloc == "testserver":
                query = {key: values[0] for key, values in parse_qs(callback.query).items()}
                return client.get(callback.path, query), idp
            response = idp.get(location, allow_redirects=False)
        elif 'name="allow"' in response.text:
            response = _consent(idp, response)
        else:
            response = _log_in(idp, response, username)
    raise AssertionError(f"the provider never sent the browser back: {response.text}")
