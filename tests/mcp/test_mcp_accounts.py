"""A person's OAuth tokens for an MCP server (`McpAccount`, through the SDK's `TokenStorage`):
sealed in the database, readable with the key and its rotations, with no key not at all."""

import io
import tarfile

import pytest
from asgiref.sync import SyncToAsync, async_to_sync, sync_to_async
from cryptography.fernet import Fernet
from django.core.management import call_command
from django.db import IntegrityError, connection, connections
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from rojos.mcp.accounts import AccountGone, AccountTokenStorage, accounts_reseal
from rojos.mcp.connect.provider import account_provider
from rojos.mcp.sealed import seal
from rojos.mcp.spec import ServerSpec
from rojos.models import McpAccount, McpServer

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.backend]

TOKENS = OAuthToken(
    access_token="access-4f1d9c", refresh_token="refresh-77ab02", expires_in=3600, scope="read"
)
CLIENT = OAuthClientInformationFull(client_id="rojo-client", client_secret="client-secret-93e1")
KEY_1, KEY_2, KEY_3 = (Fernet.generate_key().decode() for _ in range(3))


@pytest.fixture(autouse=True)
def storage_thread_closed():
    """The storage's queries ran on asgiref's thread: its connection is closed with the
    test, so that the test database can be dropped."""
    yield
    SyncToAsync.single_thread_executor.submit(connections.close_all).result(timeout=10)


@pytest.fixture
def server(db):
    return McpServer.objects.create(
        name="Tracker", slug="tracker", transport="http", url="https://mcp.example.com/mcp"
    )


def storage_of(server, user) -> AccountTokenStorage:
    """The storage as a sign-in's finish has it: its writes make the account."""
    user_id = user.pk if user else None
    return AccountTokenStorage(server_id=server.pk, user_id=user_id, makes_account=True)


def raw_columns() -> bytes:
    """Every account's sealed columns, as a backup or an export of the database holds them."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT tokens, client FROM {McpAccount._meta.db_table}")
        return b"".join(bytes(value) for row in cursor.fetchall() for value in row)


async def test_tokens_and_client_record_are_kept_sealed_and_read_back(server, users, settings):
    """What the SDK stores comes back whole; the database holds none of it in clear."""
    settings.ROJO_MCP_TOKEN_KEYS = [KEY_1]
    storage = storage_of(server, users["editor"])
    assert await storage.get_tokens() is None and await storage.get_client_info() is None
    await storage.set_tokens(TOKENS)
    await storage.set_client_info(CLIENT)

    assert await storage.get_tokens() == TOKENS
    assert await storage.get_client_info() == CLIENT
    stored = await sync_to_async(raw_columns)()
    for secret in (b"access-4f1d9c", b"refresh-77ab02", b"client-secret-93e1", b"rojo-client"):
        assert secret not in stored


async def test_each_person_and_the_shared_account_have_their_own_tokens(server, users, settings):
    """Two members' tokens on one server, and the shared connection's, never mix."""
    settings.ROJO_MCP_TOKEN_KEYS = [KEY_1]
    editor, viewer, shared = (
        storage_of(server, users["editor"]), storage_of(server, users["viewer"]),
        storage_of(server, None),
    )  # fmt: skip
    await editor.set_tokens(TOKENS)
    await shared.set_tokens(TOKENS.model_copy(update={"access_token": "shared-1"}))
    assert (await editor.get_tokens()).access_token == "access-4f1d9c"
    assert (await shared.get_tokens()).access_token == "shared-1"
    assert await viewer.get_tokens() is None
    assert await sync_to_async(McpAccount.objects.count)() == 2


async def test_only_a_sign_in_makes_an_account_and_a_later_write_never_brings_one_back(
    server, users, settings
):
    """A refresh or a registration (any storage but a sign-in's finish) updates the account
    there is; with none, the tokens are refused (`AccountGone`) and the client dropped."""
    settings.ROJO_MCP_TOKEN_KEYS = [KEY_1]
    later = AccountTokenStorage(server_id=server.pk, user_id=users["editor"].pk)
    with pytest.raises(AccountGone):
        await later.set_tokens(TOKENS)
    await later.set_client_info(CLIENT)
    assert not await McpAccount.objects.aexists()

    await storage_of(server, users["editor"]).set_tokens(TOKENS)
    await later.set_tokens(TOKENS.model_copy(update={"access_token": "refreshed-1"}))
    assert (await later.get_tokens()).access_token == "refreshed-1"
    await McpAccount.objects.all().adelete()  # a Disconnect
    with pytest.raises(AccountGone):
        await later.set_tokens(TOKENS)
    assert not await McpAccount.objects.aexists()


def test_one_shared_account_per_server(server):
    McpAccount.objects.create(server=server, user=None)
    with pytest.raises(IntegrityError):
        McpAccount.objects.create(server=server, user=None)


async def test_a_rotated_key_still_reads_them_and_a_dropped_one_does_not(server, users, settings):
    """Listed second, the old key still opens the tokens; sealed again under the new first
    key, they no longer need it; with no key that sealed them, they read as none."""
    settings.ROJO_MCP_TOKEN_KEYS = [KEY_1]
    storage = storage_of(server, users["editor"])
    await storage.set_tokens(TOKENS)

    settings.ROJO_MCP_TOKEN_KEYS = [KEY_2, KEY_1]
    assert await storage.get_tokens() == TOKENS
    assert await sync_to_async(accounts_reseal)() == (1, 0)

    settings.ROJO_MCP_TOKEN_KEYS = [KEY_2]
    assert await storage.get_tokens() == TOKENS
    settings.ROJO_MCP_TOKEN_KEYS = [KEY_1, KEY_3]
    assert await storage.get_tokens() is None
    assert await sync_to_async(accounts_reseal)() == (0, 1)


def test_a_rotation_as_documented_keeps_the_servers_client_secrets(server, settings):
    """List a new key first, run mcp_tokens_reseal, drop the old key: the client secret an
    admin stored for a server is still the one sent, not silently none (which signs in as
    a public client, refused by the provider)."""
    settings.ROJO_MCP_TOKEN_KEYS = [KEY_1]
    McpServer.objects.filter(pk=server.pk).update(
        sign_in="person",
        oauth_client_id="rojo-chat",
        oauth_issuer="https://auth.example.com",
        oauth_client_secret=seal(b"client-secret-93e1"),
    )

    settings.ROJO_MCP_TOKEN_KEYS = [KEY_2, KEY_1]
    out, err = io.StringIO(), io.StringIO()
    call_command("mcp_tokens_reseal", stdout=out, stderr=err)
    settings.ROJO_MCP_TOKEN_KEYS = [KEY_2]

    server.refresh_from_db()
    provider = account_provider(spec=ServerSpec.of(server), user_id=None)
    client = provider.storage.preregistered
    assert client.client_secret == "client-secret-93e1"
    assert client.token_endpoint_auth_method == "client_secret_basic"
    assert "1 MCP server's client secret sealed again" in out.getvalue() and not err.getvalue()


def test_a_client_secret_no_key_opens_is_named_by_the_reseal(server, settings):
    """A secret sealed under a key dropped too soon is said, by server, to be set again."""
    settings.ROJO_MCP_TOKEN_KEYS = [KEY_1]
    McpServer.objects.filter(pk=server.pk).update(oauth_client_secret=seal(b"s"))
    settings.ROJO_MCP_TOKEN_KEYS = [KEY_2]
    err = io.StringIO()
    call_command("mcp_tokens_reseal", stdout=io.StringIO(), stderr=err)
    assert "tracker" in err.getvalue() and "set it again" in err.getvalue()


async def test_without_keys_set_the_key_comes_from_secret_key_and_its_fallbacks(
    server, users, settings
):
    """No ROJO_MCP_TOKEN_KEYS: sealed under SECRET_KEY's key; after Django's rotation (the
    old secret in SECRET_KEY_FALLBACKS) still read; without the old secret, not."""
    settings.ROJO_MCP_TOKEN_KEYS = []
    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = "first-secret-" + "x" * 40, []
    storage = storage_of(server, users["editor"])
    await storage.set_tokens(TOKENS)

    settings.SECRET_KEY_FALLBACKS = [settings.SECRET_KEY]
    settings.SECRET_KEY = "second-secret-" + "y" * 40
    assert await storage.get_tokens() == TOKENS
    settings.SECRET_KEY_FALLBACKS = []
    assert await storage.get_tokens() is None


def test_a_removed_persons_tokens_go_with_them(server, users):
    """Deleting a user deletes their accounts (and their sealed tokens)."""
    McpAccount.objects.create(server=server, user=users["editor"], tokens=b"sealed")
    users["editor"].delete()
    assert not McpAccount.objects.exists()


def test_a_backup_holds_the_tokens_sealed_and_its_restore_opens_them_with_the_key(
    server, users, settings, tmp_path
):
    """The archive has no token in clear; restored, the tokens read with the key (and with
    a rotation listing it second), and with no key that sealed them, not at all."""
    settings.ROJO_MCP_TOKEN_KEYS = [KEY_1]
    async_to_sync(storage_of(server, users["editor"]).set_tokens)(TOKENS)
    async_to_sync(storage_of(server, users["editor"]).set_client_info)(CLIENT)
    path = tmp_path / "backup.tar"
    call_command("backup", str(path), stdout=io.StringIO())
    with tarfile.open(path) as archive:
        whole = b"".join(
            archive.extractfile(member).read() for member in archive if member.isfile()
        )
    assert b"McpAccount" in whole or b"mcpaccount" in whole  # the rows are in it, sealed
    for secret in (b"access-4f1d9c", b"refresh-77ab02", b"client-secret-93e1"):
        assert secret not in whole

    call_command("restore", str(path), "--replace", stdout=io.StringIO())
    [account] = McpAccount.objects.all()
    storage = AccountTokenStorage(server_id=account.server_id, user_id=account.user_id)
    settings.ROJO_MCP_TOKEN_KEYS = [KEY_2, KEY_1]
    assert async_to_sync(storage.get_tokens)() == TOKENS
    settings.ROJO_MCP_TOKEN_KEYS = [KEY_3]
    assert async_to_sync(storage.get_tokens)() is None
