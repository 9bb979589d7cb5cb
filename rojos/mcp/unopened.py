"""Secrets an installation cannot open: sealed (`sealed`) under the SECRET_KEY or
ROJO_MCP_TOKEN_KEYS of the installation an archive came from.

Unsaid, those accounts would read as signed out and those servers be signed in to as
public clients, with only a log line. So a restore says so once it has committed (a restore
hook), and `verify-backup` before it (a verify hook), each with the fix.
"""

import base64

from ..models import McpAccount, McpServer
from .sealed import opens


def unopened_note(accounts: int, servers: list[str]) -> str | None:
    """What `accounts` MCP accounts and the `servers` (slugs) with a client secret that no
    key here opens mean, and what to do, or None when there are none."""
    if not accounts and not servers:
        return None
    held = []
    if accounts:
        held.append(f"the OAuth tokens of {accounts} MCP account{'s' if accounts != 1 else ''}")
    if servers:
        held.append(
            f"the OAuth client secret of MCP server{'s' if len(servers) != 1 else ''} "
            + ", ".join(map(repr, servers))
        )
    return (
        f"{' and '.join(held)} open with none of this installation's keys: they were sealed "
        "with the SECRET_KEY (or ROJO_MCP_TOKEN_KEYS) of the installation the archive came "
        "from. Give this one that key before its servers start; else those people connect "
        "again, and an admin sets those client secrets again"
    )


def sealed_unopened_note() -> str | None:
    """A restore hook (ROJO_RESTORE_HOOKS): what the restored rows hold sealed under keys
    this installation lacks, said with its fix, or None."""
    accounts = sum(
        1
        for account in McpAccount.objects.only("pk", "tokens", "client").iterator()
        if any(sealed and not opens(sealed) for sealed in (account.tokens, account.client))
    )
    servers = McpServer.objects.exclude(oauth_client_secret=b"").only("slug", "oauth_client_secret")
    slugs = [server.slug for server in servers.iterator() if not opens(server.oauth_client_secret)]
    return unopened_note(accounts, slugs)


def _unopened(value: object) -> bool:
    """Whether an archived binary column (base64) holds a secret no key here opens. Its
    rows are read before the manifest vouches for them: a value no backup writes (not
    text, not base64) is opened by nothing, and the manifest's check then refuses it."""
    if not value:
        return False
    if not isinstance(value, str):
        return True
    try:
        return not opens(base64.b64decode(value, validate=True))
    except ValueError:  # not base64 (binascii.Error), or not even ASCII
        return True


class SealedInArchive:
    """A verify hook (ROJO_VERIFY_HOOKS): the same note as the restore's, read off an
    archive's rows as `verify-backup` checks them, before anything is restored."""

    _ACCOUNTS = McpAccount._meta.label_lower
    _SERVERS = McpServer._meta.label_lower

    def __init__(self) -> None:
        self.accounts = 0
        self.servers: list[str] = []

    def wants(self, label: str) -> bool:
        return label in (self._ACCOUNTS, self._SERVERS)

    def row(self, label: str, values: dict) -> None:
        if label == self._ACCOUNTS:
            self.accounts += _unopened(values.get("tokens")) or _unopened(values.get("client"))
        elif _unopened(values.get("oauth_client_secret")):
            self.servers.append(str(values.get("slug")))

    def note(self) -> str | None:
        return unopened_note(self.accounts, self.servers)
