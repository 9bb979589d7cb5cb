"""/mcp checks `Origin` (MCP's streamable HTTP transport requires it): a request whose
Origin is not one of this site's own is refused with 403 before its token or body is read;
one without an Origin (the SDK, curl) is served. Against a real server process."""

import httpx2
import pytest

from roject.identity.tokens import api_token_create
from tests.mcp.test_mcp_server import INITIALIZE, MCP_HEADERS
from tests.support.mcp_clients import mcp_url

pytestmark = pytest.mark.django_db(transaction=True)


MODULE_SERVER_ENV = {"CSRF_TRUSTED_ORIGINS": "https://app.example.com,https://*.example.org"}


@pytest.fixture
def server(module_server):
    return module_server


def initialize(server, project, secret: str, origin: str | None) -> httpx2.Response:
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {secret}"}
    if origin is not None:
        headers["Origin"] = origin
    return httpx2.post(mcp_url(server.base_url, project.pk), json=INITIALIZE, headers=headers)


def test_a_foreign_origin_is_refused_with_403_and_own_origins_are_served(server, users, project):
    secret = api_token_create(user=users["editor"], name="laptop").secret
    port = server.base_url.rsplit(":", 1)[1]
    foreign = [
        "https://evil.example",
        "null",
        f"http://127.0.0.1:{int(port) + 1}",  # the same host, another site's port
        f"https://127.0.0.1:{port}",  # another scheme
        "https://example.org.evil.example",
    ]
    for origin in foreign:
        answer = initialize(server, project, secret, origin)
        assert answer.status_code == 403, (origin, answer.text)
        assert answer.json() == {"error": "Forbidden: requests from this Origin are refused."}

    own = [None, server.base_url, "https://app.example.com", "https://team.example.org"]
    for origin in own:
        answer = initialize(server, project, secret, origin)
        assert answer.status_code == 200, (origin, answer.text)
        assert answer.json()["result"]["serverInfo"]


def test_a_foreign_origin_is_refused_before_the_token_is_looked_at(server, project):
    answer = httpx2.post(
        mcp_url(server.base_url, project.pk),
        json=INITIALIZE,
        headers={**MCP_HEADERS, "Origin": "https://evil.example"},
    )
    assert answer.status_code == 403 and "WWW-Authenticate" not in answer.headers
