"""An MCP server that asks for OAuth (tests/support/mcp_servers/oauth_protected.py), signing
in with the tests' real authorization server (the OIDC provider, django-oauth-toolkit), and a
person's browser round trip through Rojo's Connect.

The provider's confidential client stands for the client an admin registered for Rojo: its
redirect URIs include <site>/connections/callback/ (tests/support/oidc_server.py). Without
it, the provider knows Rojo by its client ID metadata document, which it fetches from the
app (tests/support/oidc_provider/cimd.py), and offers no dynamic registration.
"""

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, urljoin, urlsplit

import httpx2
import pytest
import requests
from django.conf import settings as django_settings

from rojos.mcp.sealed import seal
from rojos.models import McpServer
from tests.support.oidc_server import CLIENT_ID, CLIENT_SECRET, _consent, _log_in
from tests.support.server_process import _free_port, listens

SERVER = Path(__file__).parent / "mcp_servers" / "oauth_protected.py"


@dataclass
class ProtectedServer:
    url: str
    issuer: str
    process: subprocess.Popen


@pytest.fixture(scope="session")
def oauth_mcp(oidc_provider, tmp_path_factory) -> Iterator[ProtectedServer]:
    """The OAuth-protected MCP server, for the whole session, trusting the test provider."""
    port = _free_port()
    issuer = f"{oidc_provider.base_url}/o"
    log = tmp_path_factory.mktemp("oauth-mcp") / "server.log"
    with log.open("w") as out:
        process = subprocess.Popen(
            [sys.executable, str(SERVER), str(port), issuer],
            cwd=django_settings.BASE_DIR,
            env={**os.environ, "OAUTH_MCP_INTROSPECTION": f"{CLIENT_ID}:{CLIENT_SECRET}"},
            stdout=out,
            stderr=out,
        )
    url = f"http://127.0.0.1:{port}/mcp"
    deadline = time.monotonic() + 60
    while True:
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("the OAuth MCP server did not start:\n" + log.read_text())
        try:
            httpx2.get(url, timeout=1)
            if listens(pid=process.pid, port=port):  # not another worker's on the same port
                break
        except httpx2.TransportError:
            pass
        time.sleep(0.1)
    try:
        yield ProtectedServer(url=url, issuer=issuer, process=process)
    finally:
        process.terminate()  # uvicorn waits for held streams: not for long
        try:
            process.wait(timeout=3)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def protected_server_row(
    oauth_mcp: ProtectedServer, *, sign_in: str, preregistered: bool = True, **fields
) -> McpServer:
    """The server as an admin registers it: OAuth, with the provider's client for Rojo
    (`preregistered` False: no credentials, Rojo makes itself known to the provider)."""
    credentials = (
        {
            "oauth_client_id": CLIENT_ID,
            "oauth_issuer": fields.pop("oauth_issuer", oauth_mcp.issuer),
            "oauth_client_secret": seal(CLIENT_SECRET.encode()),
        }
        if preregistered
        else {}
    )
    return McpServer.objects.create(
        name=fields.pop("name", "Tracker"),
        slug=fields.pop("slug", "tracker"),
        transport=McpServer.Transport.HTTP,
        url=oauth_mcp.url,
        sign_in=sign_in,
        listed_tools=[{"name": "whoami", "inputSchema": {"type": "object"}}],
        **credentials,
        **fields,
    )


def provider_round_trip(client, location: str, *, username: str, idp=None):
    """Follow Rojo's redirect to the provider as a browser would (`idp`: the provider's
    cookies), sign in as `username` and consent, and bring the code back to Rojo's
    callback with `client`; the callback's response."""
    idp = idp or requests.Session()
    response = idp.get(location, allow_redirects=False)
    for _ in range(8):
        if response.is_redirect:
            target = urljoin(response.url, response.headers["Location"])
            back = urlsplit(target)
            if back.netloc == "testserver":
                query = {key: values[0] for key, values in parse_qs(back.query).items()}
                return client.get(back.path, query)
            response = idp.get(target, allow_redirects=False)
        elif 'name="allow"' in response.text:
            response = _consent(idp, response)
        else:
            response = _log_in(idp, response, username)
    raise AssertionError(f"the provider never sent the browser back: {response.text}")
