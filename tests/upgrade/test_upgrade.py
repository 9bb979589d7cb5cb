"""An install of the previous release, with a bit of everything in it, upgraded to this code:
every row still means what it meant.

The previous release is CHANGELOG.md's (tests/upgrade/releases.py). A database of the test's
own (a new SQLite file, or a new PostgreSQL database) is migrated from empty to that release's
last migrations as its `migrate` did, signals and all, and filled through the models as they
were then (tests/upgrade/old_install.py). Then `migrate` runs as `manage.py serve` runs it,
and the checks read the install back: every column that was there holds what it held, every
new column what its rows must mean, and today's code reads the rows as the old code meant
them (search, tokens, invitations, the audit guard, replay, branches, usage, the file ledger,
a reply a crash cut off).
"""

import json
from dataclasses import dataclass

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import DatabaseError, connection, transaction
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.loader import MigrationLoader
from django.db.migrations.state import StateApps

from roject.identity.tokens import TokenRefused, api_token_check
from roject.management.commands.serve import migration_lock
from roject.members.invitations import InvitationRefused, invitation_accept, invitation_open
from roject.models import AuditEntry
from rojos.agent.branches import branch_messages
from rojos.changes.file_history import file_history
from rojos.conversations.listing import conversation_keyed
from rojos.conversations.replay import conversation_events
from rojos.conversations.search import conversation_search
from rojos.conversations.usage_report import conversation_usage
from rojos.errors import RojoKeyRefused
from rojos.mcp.spec import rojo_mcp_links
from rojos.models import Conversation, FileChange, McpServer, Message, Rojo, TurnRecord
from rojos.turns.repair import INTERRUPTED_MESSAGE, dead_turn_end
from tests.upgrade.old_database import database_of_its_own, migrate_to, rows_of
from tests.upgrade.old_install import REVOKED_TOKEN, TOKEN, OldInstall, old_install_fill
from tests.upgrade.releases import own_apps, previous_release

pytestmark = pytest.mark.backend

# Each column added since the previous release, with what its old rows must hold and why.
# A column whose old rows need another value than this is a backfill: say so here and in the
# changelog. When a new unreleased section opens in CHANGELOG.md, this starts empty again.
ADDED_COLUMNS = {
    "rojos.mcpserver.trusted": (
        False,
        "an admin's word no old server has: untrusted, as the changelog's upgrade notes say",
    ),
    "rojos.conversation.client_key": ("", "no page sent a key before: none to find it by"),
    "rojos.rojo.instruction_files": (
        ("AGENTS.md",),
        "every rojo reads the project's AGENTS.md from the upgrade on, as the changelog's "
        "upgrade notes say",
    ),
    "rojos.rojo.reasoning_effort": ("", "not sent, as before"),
    "rojos.rojo.reasoning_back": (
        "auto",
        "each provider's rule, by the shape its reasoning comes in",
    ),
    "rojos.rojo.capability_profiles": ("{}", "no rojo was tested: turns behave as before"),
    "rojos.rojo.any_listed_model": (False, "a rojo offers its one model, as before"),
    "rojos.rojo.provider_models": ((), "the provider's list is asked for only on demand"),
    "rojos.rojo.provider_models_fetched": (None, "never asked"),
    "rojos.conversation.model": ("", "the rojo's default model, the only one there was"),
    "rojos.message.model": ("", "not recorded before: the rojo's model then"),
    "rojos.usagerecord.model": ("", "not recorded before: the rojo's model then"),
    "rojos.mcpserver.sign_in": ("", "every server signs in as before: its fixed headers"),
    "rojos.mcpserver.oauth_client_id": ("", "no credentials were registered"),
    "rojos.mcpserver.oauth_issuer": ("", "no credentials were registered"),
    "rojos.mcpserver.oauth_client_secret": (b"", "no credentials were registered"),
    "rojos.rojo.images": ("auto", "its self-test says which models take images"),
}


def _hashable(value):
    """A JSON column's list as a tuple and its object as JSON text, so that the values of a
    column make a set."""
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True)
    return tuple(value) if isinstance(value, list) else value


@dataclass(frozen=True)
class Upgraded:
    """The old install after the upgrade, and every table's rows before and after it."""

    install: OldInstall
    old_apps: StateApps
    new_apps: StateApps
    before: dict[str, dict]
    after: dict[str, dict]
    ran: set[tuple[str, str]]  # the migrations the upgrade applied (its plan)


@pytest.fixture(scope="module")
def upgraded(django_db_setup, django_db_blocker, tmp_path_factory):
    """The old install, upgraded once for the module; the checks read it in order (a few
    write: an invitation accepted, a crashed reply repaired, rows added to search)."""
    with django_db_blocker.unblock(), database_of_its_own(tmp_path_factory.mktemp("upgrade")):
        old_apps = migrate_to(previous_release())
        install = old_install_fill(old_apps)
        before = rows_of(old_apps)
        executor = MigrationExecutor(connection)
        plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
        ran = {(migration.app_label, migration.name) for migration, backwards in plan}
        assert not any(backwards for _, backwards in plan)
        with migration_lock():  # as `manage.py serve` migrates
            call_command("migrate", interactive=False, verbosity=0)
        new_apps = MigrationExecutor(connection).loader.project_state().apps
        yield Upgraded(install, old_apps, new_apps, before, rows_of(new_apps), ran)


def test_the_upgrade_ran_every_migration_since_the_previous_release(upgraded):
    graph = MigrationLoader(None, ignore_no_migrations=True).graph
    released = {
        step
        for node in previous_release().last_migrations.items()
        for step in graph.forwards_plan(node)
    }
    own = own_apps()
    assert upgraded.ran == {node for node in graph.nodes if node[0] in own} - released


def test_every_row_keeps_what_each_of_its_columns_held(upgraded):
    """No row is lost and no column that was there changes: a migration that rewrote one
    would show here (and needs a test of its own, and a line in the changelog)."""
    differences = []
    for label, rows in upgraded.before.items():
        after = upgraded.after.get(label, {})
        for pk, row in rows.items():
            new = after.get(pk)
            if new is None:
                differences.append(f"{label} {pk}: the row is gone")
                continue
            differences += [
                f"{label} {pk} {column}: {value!r} became {new.get(column, '(no column)')!r}"
                for column, value in row.items()
                if column not in new or new[column] != value
            ]
    assert differences == []
    # Every table of the project's apps had rows to compare, but those only a running turn fills.
    empty = {label for label, rows in upgraded.before.items() if not rows}
    assert {label for label in empty if label.split(".")[0] in own_apps()} == {
        "rojos.pendingapproval"
    }


def test_each_new_column_holds_what_its_old_rows_mean(upgraded):
    """ADDED_COLUMNS names every column added since the previous release; each old row
    holds the value it names (a migration that backfilled another would show here)."""
    added = {}
    for label, rows in upgraded.before.items():
        old = {f.attname for f in upgraded.old_apps.get_model(label)._meta.concrete_fields}
        new_model = upgraded.new_apps.get_model(label)
        for field in new_model._meta.concrete_fields:
            if field.attname not in old:
                column = f"{label}.{field.attname}"
                added[column] = {_hashable(upgraded.after[label][pk][field.attname]) for pk in rows}
    assert set(added) == set(ADDED_COLUMNS)
    # A table of no old rows would check nothing: the old install has some in each.
    assert added == {column: {value} for column, (value, _why) in ADDED_COLUMNS.items()}


@pytest.fixture
def install(upgraded) -> OldInstall:
    """The ids and secrets of the upgraded install's rows."""
    return upgraded.install


def test_the_new_index_of_unfinished_changes_is_there(install):
    with connection.cursor() as cursor:
        indexes = connection.introspection.get_constraints(cursor, "rojos_filechange")
    assert "file_change_unfinished" in indexes
    unfinished = FileChange.objects.filter(project_id=install.project, after__isnull=True)
    assert list(unfinished.values_list("pk", flat=True)) == [install.changes["unfinished"]]


def test_search_finds_what_it_found_and_follows_new_rows(install):
    """Titles and the user's and rojo's texts are found, not tool results, summaries or a
    draft; rows written after the upgrade are followed (SQLite: the triggers that a table
    copy dropped were made again)."""
    owner = get_user_model().objects.get(pk=install.owner)

    def found(query: str) -> set[tuple[int, str]]:
        hits = conversation_search(user=owner, query=query)
        return {(h.conversation, h.snippet if h.message else "title") for h in hits}

    chat, forked = install.chat, install.forked
    assert found("otters") == {
        (chat, "title"),
        (chat, "How many otters live in the river?"),
        (chat, "Seven otters, noted in otters.md."),
    }
    assert found("badgers") == {
        (forked, "Tell me about badgers"),
        (forked, "Badgers dig setts."),
    }
    assert found("counted") == {(chat, "No beaver was counted upstream.")}  # not the summary

    conversation = Conversation.objects.create(project_id=install.project, title="Walrus colony")
    Message.objects.create(conversation=conversation, position=0, role="user", content="Walruses?")
    assert found("walrus") == {(conversation.pk, "title"), (conversation.pk, "Walruses?")}
    Conversation.objects.filter(pk=chat).update(title="Otters and walruses")
    assert (chat, "title") in found("walruses")
    conversation.delete()
    assert found("walrus") == {(chat, "title")}
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            for fts in ("rojos_message_fts", "rojos_conversation_fts"):
                cursor.execute(f"INSERT INTO {fts}({fts}) VALUES ('integrity-check')")


def test_api_tokens_still_verify(install):
    token = api_token_check(TOKEN)
    assert (token.user_id, token.name, token.read_only) == (install.editor, "laptop", True)
    assert token.conversations.get().via_mcp
    with pytest.raises(TokenRefused):
        api_token_check(REVOKED_TOKEN)


def test_invitation_links_still_open_once(install):
    newcomer = get_user_model().objects.create_user(username="newcomer", password="pw")
    invitation = invitation_open(token=install.invitation, user=newcomer)
    assert (invitation.project_id, invitation.email) == (install.project, "newcomer@example.com")
    membership = invitation_accept(token=install.invitation, user=newcomer)
    assert (membership.project_id, membership.role) == (install.project, "editor")
    for link in (install.invitation, install.used_invitation):
        with pytest.raises(InvitationRefused, match="used already"):
            invitation_open(token=link)


def test_the_audit_log_still_refuses_changes(upgraded):
    """The guard made after `migrate` holds for the old entries (raw SQL, past the model)."""
    old = AuditEntry.objects.filter(pk__in=upgraded.before["roject.auditentry"])
    assert sorted(old.values_list("action", flat=True)) == [
        "login",
        "member_added",
        "token_created",
    ]
    with pytest.raises(DatabaseError), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("UPDATE roject_auditentry SET action = 'logout'")
    assert "logout" not in set(old.values_list("action", flat=True))


def test_conversations_replay_as_they_were(install):
    """The tool call with its change, the summary, the turns' usage; the active branch."""
    chat = Conversation.objects.get(pk=install.chat)
    events = conversation_events(chat)
    assert [e["type"] for e in events] == [
        *("START", "TOOL_CALL", "TOOL_RESULT", "CHAT", "DONE"),
        *("START", "SUMMARY", "CHAT", "DONE"),
    ]
    call, result, summary = events[1]["data"], events[2]["data"], events[6]["data"]
    assert (call["name"], call["args"]["path"]) == ("write_text_content", "otters.md")
    assert (result["result"], result["change"]) == (
        {"path": "otters.md", "bytes": 18},
        install.changes["rojo"],
    )
    assert summary["messages"] == 4
    usage = conversation_usage(conversation=chat)
    assert (usage["total"]["calls"], usage["total"]["prompt"], usage["total"]["cost"]) == (
        4,
        2960,
        "0.00132960",
    )
    assert [turn["calls"] for turn in usage["turns"].values()] == [2, 2]
    forked = Conversation.objects.get(pk=install.forked)
    assert [m.content for m in branch_messages(forked).order_by("position")] == [
        "Tell me about badgers",
        "Badgers dig setts.",
    ]
    assert [m.content for m in branch_messages(forked, 0).order_by("position")] == [
        "Tell me about beavers",
        "Beavers build dams.",
    ]
    editor = get_user_model().objects.get(pk=install.editor)
    assert conversation_keyed(project=chat.project, user=editor, key="a-page-key") == []


def test_the_file_ledger_names_who_made_each_change(install):
    """A rojo's change of the old release has no author: it is its conversation's user's."""
    history = file_history(project_id=install.project, path="otters.md")
    assert [(h["change"], h["author"], h["origin"]) for h in history] == [
        (install.changes["rojo"], "editor", "rojo")
    ]
    upload = file_history(project_id=install.project, path="map.png")
    assert [(h["author"], h["origin"]) for h in upload] == [("owner", "upload")]


def test_a_reply_a_crash_cut_off_is_repaired_as_todays_would_be(install):
    """Its dead claim is found, its turn recorded as interrupted, its draft kept and indexed."""
    owner = get_user_model().objects.get(pk=install.owner)
    assert conversation_search(user=owner, query="shallow") == []  # a draft is not indexed
    conversation = Conversation.objects.get(pk=install.crashed)
    assert async_to_sync(dead_turn_end)(conversation)
    record = TurnRecord.objects.get(conversation=conversation)
    assert (record.status, record.error) == ("interrupted", INTERRUPTED_MESSAGE)
    draft = Message.objects.get(pk=install.draft)
    assert (draft.draft, draft.content) == (False, "Grey herons stand in shallow water")
    assert [h.message for h in conversation_search(user=owner, query="shallow")] == [draft.pk]


def test_rojos_and_mcp_servers_keep_their_settings_under_the_new_rules(install):
    """Existing MCP servers start untrusted; a key variable the key rule refuses is refused
    (both in the changelog's upgrade notes); the rest is as it was."""
    server = McpServer.objects.get(pk=install.mcp_server)
    assert (server.trusted, server.env, server.args) == (False, {"TZ": "UTC"}, ["mcp-server-time"])
    link = server.rojo_links.get()
    assert (link.rojo_id, link.tools, link.ask_before) == (
        install.rojo,
        ["get_current_time"],
        True,
    )
    rojo = Rojo.objects.get(pk=install.rojo)
    [used] = rojo_mcp_links(rojo)
    assert (used.spec.command, used.tools, used.trusted) == (
        "uvx",
        frozenset({"get_current_time"}),
        False,
    )
    with pytest.raises(RojoKeyRefused, match="OPENAI_API_KEY"):
        rojo.resolved_api_key()
