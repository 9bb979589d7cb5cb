"""Rojo's MCP client against a scenario of the official conformance suite (npm
`@modelcontextprotocol/conformance`): what `manage.py mcp_conformance_client URL` runs.

The suite starts a test server for a scenario and runs the command with its URL, naming the
scenario in MCP_CONFORMANCE_SCENARIO; some scenarios bring credentials in
MCP_CONFORMANCE_CONTEXT (JSON). Every scenario goes through the connection the rojos use
(`McpConnection`), signing in through the SDK (`oauth`): the one part of our own is the
browser, which follows the authorization server's redirects as a person's browser would.
"""

from pathlib import Path
from urllib.parse import parse_qs, urljoin, urlsplit

import httpx2
import mcp_types as types
from mcp.shared.auth import AuthorizationCodeResult

from ..models import McpServer
from .connection import McpConnection
from .oauth import (
    MemoryTokenStorage,
    OAuthFlowError,
    SignIn,
    oauth_provider,
    service_account_provider,
)
from .questions import Answer, Question, questions_to
from .spec import ServerSpec

# The suite's authorization servers take this client ID metadata document URL as it is (it
# need not resolve) and check that a client offered one uses it.
CLIENT_METADATA_URL = "https://conformance-test.local/client-metadata.json"
# Never served: the browser stops at the redirect that leads here and reads the code.
REDIRECT_URI = "http://localhost:3000/callback"
_HOPS = 10  # redirects followed at most from the authorization URL back to the redirect URI


class ScenarioError(Exception):
    """The suite's scenario lacks what it should give (a credential in its context)."""


def _given(context: dict, key: str) -> str:
    if not context.get(key):
        raise ScenarioError(f"MCP_CONFORMANCE_CONTEXT has no {key!r}")
    return context[key]


class RedirectFollower:
    """A browser without a person (a `oauth.Browser`): it opens the authorization URL and
    follows the authorization server's redirects until one leads to the redirect URI, then
    hands back the code, state and issuer that redirect brought."""

    def __init__(self, redirect_uri: str) -> None:
        self.redirect_uri = redirect_uri
        self._result: AuthorizationCodeResult | None = None

    async def visit(self, authorization_url: str) -> None:
        url = authorization_url
        async with httpx2.AsyncClient(timeout=30) as http:
            for _hop in range(_HOPS):
                response = await http.get(url, follow_redirects=False)
                location = response.headers.get("location")
                if not response.is_redirect or not location:
                    raise OAuthFlowError(
                        f"the authorization server answered {response.status_code} "
                        "without sending the browser back"
                    )
                url = urljoin(url, location)
                if self._is_redirect_uri(url):
                    self._result = self._code_from(url)
                    return
        raise OAuthFlowError(f"more than {_HOPS} redirects from the authorization URL")

    async def returned(self) -> AuthorizationCodeResult:
        result, self._result = self._result, None
        if result is None:
            raise OAuthFlowError("the browser did not come back with a code")
        return result

    def _is_redirect_uri(self, url: str) -> bool:
        here, there = urlsplit(url), urlsplit(self.redirect_uri)
        return (here.scheme, here.netloc, here.path) == (there.scheme, there.netloc, there.path)

    @staticmethod
    def _code_from(url: str) -> AuthorizationCodeResult:
        query = {name: values[0] for name, values in parse_qs(urlsplit(url).query).items()}
        if "code" not in query:
            why = query.get("error_description") or query.get("error") or "no code"
            raise OAuthFlowError(f"the authorization server sent the browser back with {why!r}")
        return AuthorizationCodeResult(
            code=query["code"], state=query.get("state"), iss=query.get("iss")
        )


def scenario_auth(*, url: str, scenario: str, context: dict) -> httpx2.Auth:
    """The sign-in a scenario calls for: the client credentials grant (a service account)
    for the two scenarios that give one, else the authorization code grant, with the
    pre-registered credentials a scenario gives; it starts only if the server asks (401)."""
    storage = MemoryTokenStorage()
    if scenario == "auth/client-credentials-jwt":
        return service_account_provider(
            url=url,
            storage=storage,
            client_id=_given(context, "client_id"),
            private_key_pem=_given(context, "private_key_pem"),
            signing_algorithm=context.get("signing_algorithm") or "ES256",
        )
    if scenario == "auth/client-credentials-basic":
        return service_account_provider(
            url=url,
            storage=storage,
            client_id=_given(context, "client_id"),
            client_secret=_given(context, "client_secret"),
        )
    sign_in = SignIn(
        redirect_uri=REDIRECT_URI,
        client_id=context.get("client_id", ""),
        client_secret=context.get("client_secret", ""),
        client_metadata_url=CLIENT_METADATA_URL,
    )
    storage.client_info = sign_in.preregistered()
    return oauth_provider(
        url=url, sign_in=sign_in, storage=storage, browser=RedirectFollower(REDIRECT_URI)
    )


def _call_for(tools: list[types.Tool]) -> tuple[str, dict] | None:
    """The call a scenario's server waits for: `add_numbers(5, 3)` where offered, else its
    one tool, without arguments."""
    names = [tool.name for tool in tools]
    if "add_numbers" in names:
        return "add_numbers", {"a": 5, "b": 3}
    return (names[0], {}) if names else None


async def _accepted_as_shown(question: Question, *, call: str | None) -> Answer:
    """A person who accepts the form as it is shown (its defaults filled in, `questions`):
    what the suite's elicitation scenario asks of the client."""
    return Answer(action="accept", content={})


async def conformance_run(*, url: str, scenario: str, context: dict, root: Path) -> str:
    """Connect to the scenario's server as a rojo would, list its tools and make its call;
    a line saying what happened. Raises what a rojo's call would meet when it fails."""
    spec = ServerSpec(
        slug="conformance", name="Conformance", transport=McpServer.Transport.HTTP, url=url
    )
    auth = scenario_auth(url=url, scenario=scenario, context=context)
    connection = McpConnection(spec, root, auth=auth)
    try:
        tools = await connection.tools()
        call = _call_for(tools)
        if call is None:
            return f"{scenario}: protocol {connection.protocol_version}, no tools listed"
        with questions_to(_accepted_as_shown):
            result = await connection.call(*call)
        outcome = "an error" if result.is_error else "a result"
        return (
            f"{scenario}: protocol {connection.protocol_version}, {len(tools)} tools listed, "
            f"{call[0]} gave {outcome}"
        )
    finally:
        await connection.aclose()
