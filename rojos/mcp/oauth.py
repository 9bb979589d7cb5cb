"""Signing in to an HTTP MCP server with OAuth, through the SDK's client (`mcp.client.auth`).

The SDK runs the MCP authorization specification: discovery from the `WWW-Authenticate`
challenge and the protected resource metadata, the authorization server's metadata, client
registration (pre-registered credentials, a client ID metadata document, or dynamic
registration as the fallback), the authorization code with PKCE and the resource indicator,
scopes from the challenge or the metadata, step-up, refresh, and the token endpoint's
authentication methods; and, for a service account, the client credentials grant. This
module only supplies what the SDK asks of its host: where the tokens are kept, and how the
person's browser goes to the provider and how the code comes back (`Browser`).
"""

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal, Protocol

from mcp.client.auth import OAuthClientProvider, OAuthFlowError, TokenStorage
from mcp.client.auth.extensions.client_credentials import (
    ClientCredentialsOAuthProvider,
    PrivateKeyJWTOAuthProvider,
    SignedJWTParameters,
)
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)
from pydantic import AnyUrl

__all__ = [
    "Browser",
    "MemoryTokenStorage",
    "OAuthFlowError",
    "SignIn",
    "SignInNeeded",
    "oauth_provider",
    "service_account_provider",
]

CLIENT_NAME = "Rojo Chat"


class SignInNeeded(OAuthFlowError):
    """The server asks the person to sign in (again) where no browser is there (a turn)."""


class Browser(Protocol):
    """The person's side of the authorization code grant: `visit` sends their browser to the
    authorization URL; `returned` waits until the provider sent it back to Rojo's redirect URI
    and answers the code, state and issuer it brought."""

    async def visit(self, authorization_url: str) -> None: ...

    async def returned(self) -> AuthorizationCodeResult: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class SignIn:
    """How Rojo presents itself to a server's authorization server.

    `client_id` (and `client_secret`) are credentials an admin registered with the provider
    beforehand; without them the SDK uses `client_metadata_url` (the URL of Rojo's client ID
    metadata document, `metadata_document`) where the provider's metadata says it supports
    one, else registers dynamically. The SDK refuses a `client_metadata_url` that is not
    https with a path, so a site served over plain http gives none."""

    redirect_uri: str
    client_id: str = ""
    client_secret: str = ""
    client_metadata_url: str | None = None
    client_name: str = CLIENT_NAME
    # The authorization server the admin registered the client with: the SDK drops the
    # credentials, and sends them nowhere, when the server names another (SEP-2352).
    issuer: str | None = None

    def preregistered(self) -> OAuthClientInformationFull | None:
        """The admin's credentials as the SDK's client record, or None to register."""
        if not self.client_id:
            return None
        return OAuthClientInformationFull(
            client_id=self.client_id,
            client_secret=self.client_secret or None,
            redirect_uris=[AnyUrl(self.redirect_uri)],
            token_endpoint_auth_method="client_secret_basic" if self.client_secret else "none",
            issuer=self.issuer or None,
        )

    def client_metadata(self) -> OAuthClientMetadata:
        """What Rojo asks to be registered as, when it registers itself."""
        return OAuthClientMetadata(
            client_name=self.client_name,
            redirect_uris=[AnyUrl(self.redirect_uri)],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
        )

    def metadata_document(self, *, client_uri: str = "") -> dict:
        """Rojo's client ID metadata document, published at `client_metadata_url`
        (draft-ietf-oauth-client-id-metadata-document, MCP's SEP-991): the authorization
        server fetches it and finds the same client Rojo would register dynamically. Its
        `client_id` is that URL exactly; a public client (the document is public: no
        secret, `token_endpoint_auth_method` none)."""
        metadata = self.client_metadata()
        document = {
            "client_id": self.client_metadata_url,
            "client_name": metadata.client_name,
            # As the SDK sends them in the authorization request (pydantic's reading).
            "redirect_uris": [str(uri) for uri in metadata.redirect_uris or ()],
            "grant_types": list(metadata.grant_types),
            "response_types": list(metadata.response_types),
            "token_endpoint_auth_method": "none",
        }
        if client_uri:
            document["client_uri"] = client_uri
        return document


class MemoryTokenStorage(TokenStorage):
    """Tokens and the client record kept for the life of the process (the conformance
    command's, and a connection's until stored ones replace it)."""

    def __init__(self, client_info: OAuthClientInformationFull | None = None) -> None:
        self.tokens: OAuthToken | None = None
        self.client_info = client_info

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


def oauth_provider(
    *, url: str, sign_in: SignIn, storage: TokenStorage, browser: Browser
) -> OAuthClientProvider:
    """The SDK's `httpx2.Auth` for the authorization code grant on the server at `url`: the
    first 401 starts the sign-in, later requests carry (and refresh) the token."""
    return OAuthClientProvider(
        server_url=url,
        client_metadata=sign_in.client_metadata(),
        storage=storage,
        redirect_handler=browser.visit,
        callback_handler=browser.returned,
        client_metadata_url=sign_in.client_metadata_url,
    )


def service_account_provider(
    *,
    url: str,
    storage: TokenStorage,
    client_id: str,
    client_secret: str = "",
    private_key_pem: str = "",
    signing_algorithm: str = "ES256",
    token_endpoint_auth_method: Literal["client_secret_basic", "client_secret_post"] = (
        "client_secret_basic"
    ),
) -> OAuthClientProvider:
    """The SDK's `httpx2.Auth` for the client credentials grant: a shared connection acting
    as a service account, with a secret or a private key (`private_key_jwt`), no person."""
    if private_key_pem:
        assertion: Callable[[str], Awaitable[str]] = SignedJWTParameters(
            issuer=client_id,
            subject=client_id,
            signing_algorithm=signing_algorithm,
            signing_key=private_key_pem,
        ).create_assertion_provider()
        return PrivateKeyJWTOAuthProvider(
            server_url=url, storage=storage, client_id=client_id, assertion_provider=assertion
        )
    return ClientCredentialsOAuthProvider(
        server_url=url,
        storage=storage,
        client_id=client_id,
        client_secret=client_secret,
        token_endpoint_auth_method=token_endpoint_auth_method,
    )
