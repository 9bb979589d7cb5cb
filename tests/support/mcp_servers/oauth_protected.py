"""An MCP server that asks for OAuth, as a team's tracker or wiki would: it names its
authorization server in its protected resource metadata, answers 401 with the challenge to a
request without a good bearer token, and acts as the person the token stands for.

`python oauth_protected.py PORT ISSUER` (ISSUER: the test provider's, e.g.
http://127.0.0.1:8123/o; OAUTH_MCP_INTROSPECTION="client_id:secret", a client allowed to
introspect). A token is checked by asking the authorization server about it (RFC 7662
introspection), so only a live token that server issued for this server gets through. The
tool `whoami` answers the provider's username: a test sees whose account a call reached;
`quote_token` fails, quoting the access token in its error.
"""

import os
import sys

import httpx2
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError


class IntrospectionVerifier:
    """A bearer token is good if the authorization server says it is active (and, when it
    names an audience, that it is this server)."""

    def __init__(self, issuer: str, resource: str) -> None:
        self.endpoint = issuer.rstrip("/") + "/introspect/"
        self.resource = resource
        client_id, _, secret = os.environ["OAUTH_MCP_INTROSPECTION"].partition(":")
        self.credentials = (client_id, secret)

    async def verify_token(self, token: str) -> AccessToken | None:
        async with httpx2.AsyncClient(timeout=10, auth=self.credentials) as http:
            answer = await http.post(self.endpoint, data={"token": token})
        claims = answer.json() if answer.status_code == 200 else {}
        if not claims.get("active"):
            return None
        audience = claims.get("aud")
        audiences = audience if isinstance(audience, list) else [audience] if audience else []
        if audiences and self.resource not in audiences:
            return None
        return AccessToken(
            token=token,
            client_id=claims.get("client_id") or "",
            scopes=(claims.get("scope") or "").split(),
            subject=claims.get("username") or claims.get("sub"),
        )


def main() -> None:
    port, issuer = int(sys.argv[1]), sys.argv[2]
    server = MCPServer(
        "oauth-protected",
        token_verifier=IntrospectionVerifier(issuer, f"http://127.0.0.1:{port}/mcp"),
        auth=AuthSettings(
            issuer_url=issuer,
            resource_server_url=f"http://127.0.0.1:{port}/mcp",
            required_scopes=["openid"],
            validate_token_resource=False,
        ),
    )

    @server.tool(description="The account on this server that the call acts as.")
    def whoami() -> str:
        token = get_access_token()
        return f"account:{token.subject if token else 'nobody'}"

    @server.tool(
        description="Fails, quoting the token it was called with, as a careless server may."
    )
    def quote_token() -> str:
        token = get_access_token()
        raise ToolError(f"the token {token.token if token else None} may not do that")

    server.run("streamable-http", host="127.0.0.1", port=port)


if __name__ == "__main__":
    main()
