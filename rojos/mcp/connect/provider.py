"""The SDK's OAuth client (`OAuthClientProvider`) for an account stored in Rojo, with two hooks
and no protocol of its own.

- **Discovered metadata restored.** What the sign-in discovered (the protected resource's and
  the authorization server's metadata) is kept with the account and set again on a new
  provider, so a later process refreshes at the token endpoint found at sign-in, never at the
  SDK's guess on the MCP server's own host.
- **Sent only where it was issued.** A stored token goes to the server's URL only while the
  resource its sign-in discovered still covers that URL (the SDK's rule for the resource
  indicator, RFC 8707: same origin, a path under the resource's); else it is not used, and
  the person is asked to connect again. The admin deletes the accounts of a server it moves
  (`removal.server_moved`): this stands behind a URL changed any other way.
- **No account brought back.** Only the sign-in's finish makes the account's row; a refresh
  by a session still holding tokens in memory after the account was deleted (a Disconnect,
  the person removed, the server moved) is dropped (`AccountGone`), and that session is
  signed out: its request goes without a token, and the person is asked to connect again.
- **Paused while a person connects.** The SDK's authorization code grant awaits the browser's
  return inside one request. Rojo's callback may land on another process, minutes later: so
  the flow is run up to the authorization URL, the PKCE verifier and the flow's context are
  taken (`Paused`) and the request is abandoned; the callback finishes with the SDK's own
  token exchange (`flow.sign_in_finish`). In a turn nobody's browser is there: a server that
  asks for a sign-in gets `SignInNeeded`, never a redirect.
"""

import logging
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

import httpx2
from mcp.client.auth import OAuthClientProvider
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthMetadata,
    OAuthToken,
    ProtectedResourceMetadata,
)
from mcp.shared.auth_utils import check_resource_allowed, resource_url_from_server_url
from pydantic import ValidationError

from ..accounts import AccountGone, AccountTokenStorage
from ..destinations import Destinations, checked_client_options
from ..oauth import SignIn, SignInNeeded
from ..sealed import unseal
from ..spec import ServerSpec

logger = logging.getLogger("rojos.mcp")

# Handed to the SDK as the code while the flow is paused: it never leaves this process.
_NOT_YET = "rojo-sign-in-paused"
# The SDK wants a redirect URI on its client record even where none is used (a turn's
# refresh); a sign-in always gives the real one (the site's /connections/callback/).
UNUSED_REDIRECT_URI = "http://localhost/connections/callback/"


class _Paused(BaseException):
    """The flow reached the authorization URL: stop here. A BaseException, so that the SDK's
    `except Exception` (which logs a failed sign-in) lets it through unlogged."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Paused:
    """A sign-in waiting for the browser: where to send it, and what finishing needs."""

    authorization_url: str
    state: str
    flow: dict  # sealed at rest (`pending`): the verifier and the flow's context


def discovered_of(context) -> dict:
    """The SDK context's discovered metadata, as JSON (public documents, no secret)."""
    dump = {}
    if context.protected_resource_metadata is not None:
        dump["resource"] = context.protected_resource_metadata.model_dump(mode="json")
    if context.oauth_metadata is not None:
        dump["server"] = context.oauth_metadata.model_dump(mode="json")
    if context.auth_server_url:
        dump["server_url"] = context.auth_server_url
    dump["signed_in_at"] = context.server_url  # the MCP server's URL, for `discovered_covers`
    return dump


def discovered_covers(discovered: dict, url: str) -> bool:
    """Whether tokens from the sign-in that discovered `discovered` may go to `url`: the
    protected resource it named covers it (or, from a server that named none, the URL
    signed in at has its origin). Nothing to tell: no."""
    resource = (discovered.get("resource") or {}).get("resource")
    if not resource and discovered.get("signed_in_at"):
        signed_in_at = urlsplit(discovered["signed_in_at"])
        resource = f"{signed_in_at.scheme}://{signed_in_at.netloc}/"
    if not resource:
        return False
    requested = resource_url_from_server_url(url)
    return check_resource_allowed(requested_resource=requested, configured_resource=resource)


def discovered_set(context, discovered: dict) -> None:
    """Set metadata kept from a sign-in on a new SDK context (what is unreadable is skipped:
    the SDK discovers it again at the next challenge)."""
    try:
        if "resource" in discovered:
            context.protected_resource_metadata = ProtectedResourceMetadata.model_validate(
                discovered["resource"]
            )
        if "server" in discovered:
            context.oauth_metadata = OAuthMetadata.model_validate(discovered["server"])
    except ValidationError:
        return
    context.auth_server_url = discovered.get("server_url") or context.auth_server_url


class AccountProvider(OAuthClientProvider):
    """The SDK's provider for one stored account (see the module's docstring)."""

    def __init__(self, *, url: str, sign_in: SignIn, storage: AccountTokenStorage, pausing: bool):
        super().__init__(
            server_url=url,
            client_metadata=sign_in.client_metadata(),
            storage=storage,
            redirect_handler=self._visit,
            callback_handler=self._returned,
            client_metadata_url=sign_in.client_metadata_url,
        )
        self.storage = storage
        self.pausing = pausing
        self.paused: Paused | None = None
        self._authorization_url = ""

    async def _initialize(self) -> None:
        await super()._initialize()
        discovered = await self.storage.get_discovered()
        if self.context.current_tokens is not None and not discovered_covers(
            discovered, self.context.server_url
        ):
            # Issued for another resource (the server's URL changed since): never sent.
            logger.warning(
                "MCP server %s: the stored tokens were issued for another URL; not sent",
                self.storage.server_id,
            )
            self.context.current_tokens = None
            return
        discovered_set(self.context, discovered)
        # The SDK knows a token's expiry only from the answer that brought it: a stored
        # one would be sent until refused, then a whole sign-in asked for. Told when it
        # runs out, the SDK refreshes it first.
        self.context.token_expiry_time = await self.storage.get_tokens_expire()

    async def _handle_refresh_response(self, response: httpx2.Response) -> bool:
        used = self.context.current_tokens
        try:
            if await super()._handle_refresh_response(response):
                return True
        except AccountGone:
            logger.info(
                "MCP server %s: a refresh for an account deleted since was dropped",
                self.storage.server_id,
            )
            self.context.clear_tokens()  # the SDK goes on as signed out
            return False
        return await self._refreshed_elsewhere(used)

    async def _refreshed_elsewhere(self, used: OAuthToken | None) -> bool:
        """After a refused refresh: whether another session of the same account (the
        member's in another project, or in another server process) refreshed first, the
        refresh token rotated, its tokens stored; if so this one goes on with them. Else
        the member was told to connect again, the account being fine."""
        stored = await self.storage.get_tokens()
        if stored is None or used is None or stored.refresh_token == used.refresh_token:
            return False
        self.context.current_tokens = stored
        self.context.token_expiry_time = await self.storage.get_tokens_expire()
        logger.info(
            "MCP server %s: refreshed by another session of the account; its tokens are used",
            self.storage.server_id,
        )
        return True

    async def _perform_authorization(self) -> httpx2.Request:
        if not self.pausing:
            raise SignInNeeded("the server asks for a sign-in, and nobody's browser is here")
        # The exchange at the callback is refused at a token endpoint on an internal address
        # (`destinations`): the person is told now, before a trip to the provider for nothing.
        await Destinations.of(self.context.server_url).url_check(self._get_token_endpoint())
        _code, verifier = await self._perform_authorization_code_grant()
        context = self.context
        client = context.client_info
        self.paused = Paused(
            authorization_url=self._authorization_url,
            state=_state_of(self._authorization_url),
            flow={
                "verifier": verifier,
                "redirect_uri": str(context.client_metadata.redirect_uris[0]),
                "scope": context.client_metadata.scope,
                "protocol_version": context.protocol_version,
                "client": client.model_dump(mode="json", exclude_none=True) if client else None,
                "client_metadata_url": context.client_metadata_url,
                "discovered": discovered_of(context),
            },
        )
        raise _Paused

    async def _visit(self, authorization_url: str) -> None:
        self._authorization_url = authorization_url

    async def _returned(self) -> AuthorizationCodeResult:
        """What the SDK checks before it hands back the verifier: the state it made, the
        issuer it expects; the real ones are checked by the callback (`flow`)."""
        metadata = self.context.oauth_metadata
        return AuthorizationCodeResult(
            code=_NOT_YET,
            state=_state_of(self._authorization_url),
            iss=str(metadata.issuer) if metadata and metadata.issuer else None,
        )

    async def finish(self, *, flow: dict, code: str, iss: str | None) -> None:
        """The SDK's token exchange for the code the browser brought back, with the context
        paused at the start; the tokens go to the account's storage."""
        from mcp.client.auth.utils import validate_authorization_response_iss

        context = self.context
        discovered_set(context, flow["discovered"])
        if flow.get("client"):
            context.client_info = OAuthClientInformationFull.model_validate(flow["client"])
        context.client_metadata.scope = flow.get("scope")
        context.protocol_version = flow.get("protocol_version")
        validate_authorization_response_iss(iss, context.oauth_metadata)
        request = await self._exchange_token_authorization_code(code, flow["verifier"])
        options = checked_client_options(context.server_url)  # the code and secret: no SSRF
        async with httpx2.AsyncClient(timeout=30, follow_redirects=False, **options) as http:
            response = await http.send(request)
            await self._handle_token_response(response)  # makes the account (`makes_account`)
        preregistered = self.storage.preregistered
        if context.client_info and (
            preregistered is None or context.client_info.client_id != preregistered.client_id
        ):
            await self.storage.set_client_info(context.client_info)  # registered at Connect
        await self.storage.set_discovered(flow["discovered"])


def _state_of(authorization_url: str) -> str:
    return (parse_qs(urlsplit(authorization_url).query).get("state") or [""])[0]


def account_provider(
    *,
    spec: ServerSpec,
    user_id: int | None,
    redirect_uri: str = "",
    pausing: bool = False,
    client_metadata_url: str | None = None,
    finishing: bool = False,
) -> AccountProvider:
    """The provider for the person's account on the server (`user_id` None: the shared one),
    with the admin's client credentials, bound to their authorization server, when set.

    `client_metadata_url` (Connect's, on an https site) is the URL of Rojo's client ID
    metadata document: the SDK uses it where the provider supports one and no credentials
    were set or registered before; the SDK refuses any but an https URL. `finishing`: the
    sign-in's finish, the one provider that makes the account's row."""
    secret = unseal(spec.oauth_client_secret) if spec.oauth_client_secret else None
    sign_in = SignIn(
        redirect_uri=redirect_uri or UNUSED_REDIRECT_URI,
        client_id=spec.oauth_client_id,
        client_secret=(secret or b"").decode(),
        client_metadata_url=client_metadata_url,
        issuer=spec.oauth_issuer or None,
    )
    storage = AccountTokenStorage(
        server_id=spec.server_id,
        user_id=user_id,
        preregistered=sign_in.preregistered(),
        makes_account=finishing,
    )
    return AccountProvider(url=spec.url, sign_in=sign_in, storage=storage, pausing=pausing)


def connection_auth(spec: ServerSpec, user_id: int | None) -> httpx2.Auth | None:
    """How a turn's session signs in to the server: the turn's user's account (each member
    signs in), the shared one, or nothing (fixed headers)."""
    if spec.per_person:
        return account_provider(spec=spec, user_id=user_id)
    if spec.sign_in:
        return account_provider(spec=spec, user_id=None)
    return None
