"""A person's account on an MCP server (`McpAccount`) as the SDK's `TokenStorage`: the
tokens and client record the SDK's OAuth keeps, read from and written to the row, sealed
(`sealed`), so a turn, a refresh and the next process all find them."""

from datetime import timedelta

from asgiref.sync import sync_to_async
from django.db import transaction
from django.utils import timezone
from mcp.client.auth import TokenStorage
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from pydantic import BaseModel, ValidationError

from ..models import McpAccount, McpServer, McpSignInPending
from .sealed import InvalidToken, reseal, seal, unseal


def _opened(sealed: bytes, model: type[BaseModel]):
    """The record sealed in a column, or None (none stored, no key opens it, or unreadable)."""
    data = unseal(sealed) if sealed else None
    if data is None:
        return None
    try:
        return model.model_validate_json(data)
    except ValidationError:
        return None


class AccountGone(Exception):
    """Tokens for an account that no longer exists (disconnected, its person removed or its
    server moved while a session held them in memory): not kept, and not to be used."""


class AccountTokenStorage(TokenStorage):
    """The SDK's storage for one person's account on one server (`user_id` None: the shared
    one). Only the tokens of a sign-in's finish (`makes_account`) make the row; any other
    write (a refresh, a registration) updates the row there is and is dropped when there is
    none, so a session holding tokens in memory never brings back an account deleted under
    it (a refresh raises `AccountGone`). `preregistered`, the admin's client record, stands
    before any the SDK registered."""

    def __init__(
        self,
        *,
        server_id: int,
        user_id: int | None,
        preregistered: OAuthClientInformationFull | None = None,
        makes_account: bool = False,
    ) -> None:
        self.server_id = server_id
        self.user_id = user_id
        self.preregistered = preregistered
        self.makes_account = makes_account

    async def get_tokens(self) -> OAuthToken | None:
        return await sync_to_async(self._read)("tokens", OAuthToken)

    async def set_tokens(self, tokens: OAuthToken) -> None:
        if not await sync_to_async(self._write)("tokens", tokens):
            raise AccountGone(f"no account of user {self.user_id} on server {self.server_id}")

    async def get_tokens_expire(self) -> float | None:
        """When the stored access token runs out (a POSIX time), or None if it did not say."""
        found = McpAccount.objects.filter(server_id=self.server_id, user_id=self.user_id)
        expires = await found.values_list("tokens_expire", flat=True).afirst()
        return expires.timestamp() if expires else None

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        if self.preregistered is not None:
            return self.preregistered
        return await sync_to_async(self._read)("client", OAuthClientInformationFull)

    async def get_discovered(self) -> dict:
        """The metadata the sign-in discovered (`McpAccount.discovered`), or {}."""
        found = McpAccount.objects.filter(server_id=self.server_id, user_id=self.user_id)
        return await found.values_list("discovered", flat=True).afirst() or {}

    async def set_discovered(self, discovered: dict) -> None:
        await sync_to_async(self._write_discovered)(discovered)

    def _write_discovered(self, discovered: dict) -> None:
        with transaction.atomic():
            account = self._account()
            if account is not None:
                account.discovered = discovered
                account.save(update_fields=["discovered", "updated"])

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        # With no account yet (a Connect registering), dropped: the finish keeps it.
        await sync_to_async(self._write)("client", client_info)

    def _read(self, column: str, model: type[BaseModel]):
        account = McpAccount.objects.filter(server_id=self.server_id, user_id=self.user_id)
        sealed = account.values_list(column, flat=True).first()
        return _opened(sealed, model) if sealed else None

    def _account(self, *, make: bool = False) -> McpAccount | None:
        """(In a transaction) The row, locked for the write; `make`: made if missing."""
        if make:
            account, _made = McpAccount.objects.select_for_update().get_or_create(
                server_id=self.server_id, user_id=self.user_id
            )
            return account
        found = McpAccount.objects.select_for_update()
        return found.filter(server_id=self.server_id, user_id=self.user_id).first()

    def _write(self, column: str, record: BaseModel) -> bool:
        """Seal `record` into the account's column; whether there was an account to keep it."""
        sealed = seal(record.model_dump_json(exclude_none=True).encode())
        with transaction.atomic():
            # A sign-in's tokens make the account; what it writes after them finds it.
            account = self._account(make=self.makes_account and column == "tokens")
            if account is None:
                return False
            setattr(account, column, sealed)
            fields = [column, "updated"]
            if column == "tokens":
                lasts = getattr(record, "expires_in", None)
                account.tokens_expire = (
                    timezone.now() + timedelta(seconds=lasts) if lasts is not None else None
                )
                fields.append("tokens_expire")
            account.save(update_fields=fields)
        return True


def account_connected(*, server_id: int, user_id: int | None) -> bool:
    """(Blocking) Whether the person (None: the shared connection) has tokens for the server."""
    accounts = McpAccount.objects.filter(server_id=server_id, user_id=user_id)
    return accounts.exclude(tokens=b"").exists()


def account_disconnect(*, server_id: int, user_id: int | None) -> bool:
    """(Blocking) Delete the person's tokens and client record for the server; whether any
    were there."""
    deleted, _kinds = McpAccount.objects.filter(server_id=server_id, user_id=user_id).delete()
    return bool(deleted)


def accounts_of_user_delete(*, user_id: int) -> list[tuple[int, str, str]]:
    """(Blocking) Delete every account of the person (left every project, or deactivated);
    the servers they were on, as (id, slug, name)."""
    accounts = McpAccount.objects.filter(user_id=user_id)
    servers = list(accounts.values_list("server_id", "server__slug", "server__name"))
    accounts.delete()
    return servers


def accounts_of_server_delete(*, server_id: int) -> int:
    """(Blocking) Delete every account on the server, members' and the shared one; how many."""
    deleted, _kinds = McpAccount.objects.filter(server_id=server_id).delete()
    return deleted


def _resealed(row, columns: tuple[str, ...]) -> dict[str, bytes]:
    """The row's sealed columns sealed again under the first key (InvalidToken if no key
    opens one)."""
    return {column: reseal(getattr(row, column)) for column in columns if getattr(row, column)}


def accounts_reseal() -> tuple[int, int]:
    """(Blocking) Seal every account's records again under the first key of
    ROJO_MCP_TOKEN_KEYS (after a new key was listed first): how many rows were sealed again,
    and how many no key opens (left as they are: those people sign in again)."""
    resealed = unopened = 0
    for account in McpAccount.objects.only("pk", "tokens", "client").iterator():
        try:
            fields = _resealed(account, ("tokens", "client"))
        except InvalidToken:
            unopened += 1
            continue
        McpAccount.objects.filter(pk=account.pk).update(**fields)
        resealed += 1
    return resealed, unopened


def client_secrets_reseal() -> tuple[int, list[str]]:
    """(Blocking) Seal the servers' OAuth client secrets, and the sign-ins under way, again
    under the first key, as `accounts_reseal` does the accounts: a secret left under a key
    then dropped would read as none, and the server be signed in to as a public client. How
    many secrets were sealed again, and the slugs of the servers whose secret no key opens
    (an admin sets it again)."""
    resealed, unopened = 0, []
    servers = McpServer.objects.exclude(oauth_client_secret=b"")
    for server in servers.only("pk", "slug", "oauth_client_secret").iterator():
        try:
            fields = _resealed(server, ("oauth_client_secret",))
        except InvalidToken:
            unopened.append(server.slug)
            continue
        McpServer.objects.filter(pk=server.pk).update(**fields)
        resealed += 1
    for pending in McpSignInPending.objects.only("pk", "flow").iterator():
        try:
            fields = _resealed(pending, ("flow",))
        except InvalidToken:
            continue  # found by no callback: that person presses Connect again
        McpSignInPending.objects.filter(pk=pending.pk).update(**fields)
    return resealed, unopened
