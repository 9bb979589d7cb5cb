"""Secrets sealed with the key of the installation an archive came from: a restore on one
with another SECRET_KEY says which, and how to open them, instead of leaving the MCP
accounts signed out and the servers signed in to as public clients with a log line only.

The archive is restored by `manage.py restore` on the other installation, a process of its
own with the SECRET_KEY given it.
"""

import io

import pytest
from django.core.management import call_command

from rojos.mcp.sealed import seal
from rojos.models import McpAccount
from tests.support.mcp_helpers import time_server

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.backend]

ANOTHER_KEY = "another-installation-key-another-installation-key-another-key"


def test_secrets_sealed_with_another_key_are_named_by_verify_and_after_a_restore(
    users, tmp_path, other_installation, settings
):
    server = time_server(oauth_client_id="rojo", oauth_client_secret=seal(b"client secret"))
    McpAccount.objects.create(server=server, user=users["editor"], tokens=seal(b"{}"))
    archive = tmp_path / "sealed.tar"
    call_command("backup", str(archive), stdout=io.StringIO())

    checked = other_installation.manage(
        "verify-backup", str(archive), env={"SECRET_KEY": ANOTHER_KEY}
    )
    elsewhere = other_installation.manage("restore", str(archive), env={"SECRET_KEY": ANOTHER_KEY})

    assert elsewhere.returncode == 0  # restored: the rows are whole, only unopened
    assert elsewhere.stderr.splitlines() == [
        "warning: the OAuth tokens of 1 MCP account and the OAuth client secret of MCP "
        "server 'time' open with none of this installation's keys: they were sealed with "
        "the SECRET_KEY (or ROJO_MCP_TOKEN_KEYS) of the installation the archive came from. "
        "Give this one that key before its servers start; else those people connect again, "
        "and an admin sets those client secrets again"
    ]

    assert checked.returncode == 0  # sound, and said before the restore
    assert checked.stderr.splitlines() == elsewhere.stderr.splitlines()

    same_key = other_installation.manage("restore", "--replace", str(archive))
    assert same_key.stderr == ""
    assert other_installation.manage("verify-backup", str(archive)).stderr == ""
