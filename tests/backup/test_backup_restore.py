"""A whole installation backed up, restored on the other database backend, and back.

SQLite to PostgreSQL is how an installation outgrows the embedded default (docs/operations.md,
"Backups"); the other way works alike. The comparison is of every table's rows (ids,
relations, times to the microsecond, JSON, decimals) and every file (bytes, mode, links),
then of what people use: search, undo, tokens on /api and /mcp, the audit log's trigger.
"""

import io
import shutil

import orjson
import pytest
from asgiref.sync import async_to_sync
from django.conf import settings
from django.core.management import call_command
from django.db import DatabaseError, connection, transaction
from django.test import Client

from roject.models import AuditEntry
from roject.storage import project_root
from rojos.agent.branches import branch_messages
from rojos.changes.undo import change_undo
from rojos.conversations.search import conversation_search
from rojos.models import Conversation, FileChange, McpAccount
from tests.backup.archive_contents import archive_contents
from tests.support.backup_installation import EXACT, SEALED, installation_build
from tests.support.helpers import assert_history_valid
from tests.support.mcp_clients import mcp_url, with_mcp

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.backend]


# The same search, run on the other installation by `manage.py shell`.
SEARCH = """
import orjson
from django.contrib.auth import get_user_model
from rojos.conversations.search import conversation_search
user = get_user_model().objects.get(username="editor")
hits = [(w, h.conversation, h.message, h.snippet) for w in {words!r}
        for h in conversation_search(user=user, query=w)]
print(orjson.dumps(hits).decode())
"""


def search_hits(user, words: list[str]) -> list[tuple]:
    return [
        (word, hit.conversation, hit.message, hit.snippet)
        for word in words
        for hit in conversation_search(user=user, query=word)
    ]


def installation_empty() -> None:
    """This installation as a new one is: migrated, no rows, no storage."""
    call_command("flush", interactive=False, verbosity=0)
    for child in settings.ROJO_STORAGE_DIR.iterdir():
        shutil.rmtree(child)


def test_an_installation_moves_to_the_other_backend_and_back_with_nothing_lost(
    users, project, other_installation, tmp_path, server_process
):
    built = installation_build(users, project)
    editor = users["editor"]
    hits = search_hits(editor, built.search_words)
    assert len(hits) >= 3  # a title and messages
    first = tmp_path / "first.tar.gz"
    out = io.StringIO()
    call_command("backup", str(first), stdout=out)
    assert "3 projects" in out.getvalue()

    other_installation.manage("restore", str(first))
    recorded = other_installation.query(
        "SELECT object_repr FROM roject_auditentry WHERE action = %s", ("backup_restored",)
    )
    assert recorded == [("first.tar.gz",)]  # the restore's own entry, with the archive's name
    created = other_installation.query(
        "SELECT created FROM rojos_message WHERE content = %s", ("Where is the wombat plan?",)
    )
    assert str(created[0][0]).startswith("2026-12-05 00:48:18.161688")  # not .161000
    found_there = other_installation.python(SEARCH.format(words=built.search_words))
    assert orjson.loads(found_there) == [list(hit) for hit in hits]  # its own index
    second = tmp_path / "second.tar"
    other_installation.manage("backup", str(second))
    tables, files = archive_contents(first)
    assert archive_contents(second) == (tables, files)
    assert {"auth.user", "roject.apitoken", "roject.oidcidentity", "roject.auditentry"} <= set(
        tables
    )
    assert (built.projects[0].pk, "root/run.sh") in files
    assert files[(built.projects[0].pk, "root/run.sh")][1] == 0o755
    assert files[(built.projects[0].pk, "root/shortcut")][:4] == ("link", 0o777, 0, "docs/deep")

    installation_empty()
    call_command("restore", str(second), stdout=io.StringIO())
    third = tmp_path / "third.tar"
    call_command("backup", str(third), stdout=io.StringIO())
    assert archive_contents(third) == (tables, files)
    assert bytes(McpAccount.objects.get().tokens) == SEALED
    restored = Conversation.objects.get(pk=built.conversation.pk)
    assert restored.messages.get(position=0).created == EXACT

    assert search_hits(editor, built.search_words) == hits
    for conversation in Conversation.objects.all():
        for branch in [0, *(fork["id"] for fork in conversation.branches)]:
            assert_history_valid(list(branch_messages(conversation, branch).order_by("position")))
    change = FileChange.objects.get(pk=built.change.pk)
    async_to_sync(change_undo)(change=change, user=editor)
    assert (project_root(project.pk) / "docs/plan.md").read_text() == "first plan\n"

    bearer = {"HTTP_AUTHORIZATION": f"Bearer {built.secret}"}
    answer = Client().get("/api/projects", **bearer)
    assert answer.status_code == 200
    assert sorted(p["id"] for p in answer.json()) == sorted(p.pk for p in built.projects)
    server = server_process()
    listed = with_mcp(mcp_url(server.base_url, project.pk), built.secret, lambda c: c.list_tools())
    assert "write_text_content" in {tool.name for tool in listed.tools}

    with pytest.raises(DatabaseError), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("UPDATE roject_auditentry SET action = 'undo'")
    assert AuditEntry.objects.filter(action="undo").count() == 1  # the undo just made
    fresh = Conversation.objects.create(project=project, user=editor, title="after")
    assert (
        fresh.pk > built.gone_conversation
    )  # the hard-deleted conversation's id is not given again
