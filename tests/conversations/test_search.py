"""Full-text search of titles and messages, on the database's own index (SQLite FTS5 or
PostgreSQL tsvector: run this module with DATABASE_URL set for the latter)."""

import pytest
from django.db import connection

from roject.members.projects import project_create
from rojos.conversations.search import conversation_search
from rojos.conversations.search_triggers import search_triggers_restore
from rojos.models import Conversation, Message

pytestmark = pytest.mark.django_db(transaction=True)


def add(conversation, text, role="user", **fields) -> Message:
    position = conversation.messages.count()
    return Message.objects.create(
        conversation=conversation, position=position, role=role, content=text, **fields
    )


@pytest.fixture
def conversations(users, project):
    other = project_create(name="Other", owner=users["outsider"])
    ours = Conversation.objects.create(project=project, user=users["owner"], title="Release plan")
    theirs = Conversation.objects.create(project=other, user=users["outsider"], title="Secret")
    return ours, theirs


def hits(user, query, **options):
    return [
        (h.conversation, h.message) for h in conversation_search(user=user, query=query, **options)
    ]


def test_titles_and_messages_are_found_by_words_and_the_last_word_as_a_prefix(users, conversations):
    ours, _ = conversations
    question = add(ours, "Where is the changelog for Version 2?")
    answer = add(ours, "The CHANGELOG lives in docs/changes.md", role="assistant")
    assert hits(users["viewer"], "release") == [(ours.pk, None)]
    assert hits(users["viewer"], "rele") == [(ours.pk, None)]  # as you type
    found = hits(users["viewer"], "changelog")
    assert sorted(found) == sorted([(ours.pk, question.pk), (ours.pk, answer.pk)])
    assert hits(users["viewer"], "changelog version") == [(ours.pk, question.pk)]
    assert hits(users["viewer"], "versions") == []  # no stemming, no LIKE '%...%'
    snippet = conversation_search(user=users["viewer"], query="docs")[0].snippet
    assert "docs/changes.md" in snippet


def test_nothing_of_other_projects_and_no_tool_results(users, project, conversations):
    """The outsider's project and the tool results (file contents) are never searched."""
    ours, theirs = conversations
    secret = add(theirs, "the secret password is tulip")
    add(ours, "tulip bulbs", role="tool", tool_call_id="c1", name="get_text_content")
    assert hits(users["owner"], "tulip") == []
    assert hits(users["outsider"], "tulip") == [(theirs.pk, secret.pk)]
    assert hits(users["owner"], "tulip", project_id=theirs.project_id) == []


def test_the_index_follows_updates_renames_and_deletes(users, project, conversations):
    """A reply's text saved over its draft, a rename and a delete are reflected at once."""
    ours, _ = conversations
    reply = add(ours, "drafting", role="assistant")
    reply.content = "finished answer about kittens"
    reply.save(update_fields=["content"])
    assert hits(users["viewer"], "drafting") == []
    assert hits(users["viewer"], "kittens") == [(ours.pk, reply.pk)]
    ours.title = "Kitten care"
    ours.save(update_fields=["title"])
    assert hits(users["viewer"], "release") == []
    assert (ours.pk, None) in hits(users["viewer"], "kitten")
    ours.delete()
    assert hits(users["viewer"], "kitten") == []


def test_query_syntax_is_taken_as_words(users, conversations):
    """Operators and quotes in the query are words or nothing, never FTS syntax errors."""
    ours, _ = conversations
    message = add(ours, 'He said "NEAR" OR AND')
    for query in ['"', "NEAR(", "a*b", "OR", "-", "':*", "!&|", ""]:
        conversation_search(user=users["viewer"], query=query)  # no error
    assert hits(users["viewer"], '"near"') == [(ours.pk, message.pk)]


def test_the_search_uses_the_full_text_index_not_a_scan(users, conversations):
    """The query plan reads the FTS table (SQLite) or the GIN index (PostgreSQL)."""
    ours, _ = conversations
    for i in range(50):
        add(ours, f"filler message number {i}")
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SET enable_seqscan = off")
            cursor.execute(
                "EXPLAIN SELECT id FROM rojos_message "
                "WHERE search_vector @@ to_tsquery('simple', 'filler:*')"
            )
            plan = " ".join(row[0] for row in cursor.fetchall())
            assert "rojos_message_search" in plan
        else:
            cursor.execute(
                "EXPLAIN QUERY PLAN SELECT rowid FROM rojos_message_fts "
                "WHERE rojos_message_fts MATCH '\"filler\"*'"
            )
            plan = " ".join(str(row[-1]) for row in cursor.fetchall())
            assert "VIRTUAL TABLE INDEX" in plan


def indexed_ids() -> set[int]:
    """The ids of the messages the full-text index holds, read from the index itself."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT id FROM rojos_message WHERE search_vector IS NOT NULL")
        else:
            cursor.execute(
                "CREATE VIRTUAL TABLE IF NOT EXISTS temp.message_terms "
                "USING fts5vocab(main, rojos_message_fts, instance)"
            )
            cursor.execute("SELECT DISTINCT doc FROM temp.message_terms")
        return {id for (id,) in cursor.fetchall()}


def test_a_draft_is_not_indexed_until_its_reply_ends(users, conversations):
    """A reply saved while it streams (Message.draft) is not searchable and is re-indexed at
    none of its saves; clearing the marker indexes the finished text, and deleting drafts
    and finished replies leaves the index exactly the searchable rows (FTS5 never asked to
    delete a row it does not hold)."""
    ours, _ = conversations
    question = add(ours, "Tell me about otters")
    reply = add(ours, "Otters are", role="assistant", draft=True)
    assert hits(users["viewer"], "are") == []
    reply.content = "Otters are playful swimmers"
    reply.save(update_fields=["content", "draft"])
    assert hits(users["viewer"], "playful") == []
    assert indexed_ids() == {question.pk}

    reply.content, reply.draft = "Otters are playful swimmers and divers", False
    reply.save(update_fields=["content", "draft"])
    assert hits(users["viewer"], "divers") == [(ours.pk, reply.pk)]
    assert hits(users["viewer"], "otters") == [(ours.pk, reply.pk), (ours.pk, question.pk)]
    kept = add(ours, "Half a sente", role="assistant", draft=True)
    Message.objects.filter(pk=kept.pk).update(draft=False)  # what crash recovery does
    assert hits(users["viewer"], "sente") == [(ours.pk, kept.pk)]
    left = add(ours, "cut off mid", role="assistant", draft=True)
    assert indexed_ids() == {question.pk, reply.pk, kept.pk}

    Message.objects.filter(pk__in=[kept.pk, left.pk]).delete()
    assert indexed_ids() == {question.pk, reply.pk}
    ours.delete()
    assert indexed_ids() == set()
    assert hits(users["viewer"], "otters") == []


@pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's triggers")
def test_triggers_made_again_after_a_migration_still_skip_drafts(users, conversations):
    """The triggers a table remake dropped, made again after migrate, follow the same rule:
    a draft is indexed only once its marker is cleared."""
    ours, _ = conversations
    with connection.cursor() as cursor:
        for kind in ("insert", "delete", "update"):
            cursor.execute(f"DROP TRIGGER rojos_message_fts_{kind}")
    search_triggers_restore(connection)
    reply = add(ours, "Beavers build dams", role="assistant", draft=True)
    assert hits(users["viewer"], "beavers") == []
    reply.draft = False
    reply.save(update_fields=["draft"])
    assert hits(users["viewer"], "beavers") == [(ours.pk, reply.pk)]
    reply.delete()
    assert indexed_ids() == set()


def test_migrating_back_before_the_draft_marker_indexes_the_drafts(users, conversations):
    """On the way back from 0020 every text message is indexed again (the old rule), drafts
    left by a running or crashed turn included: else they were missing from the index, and
    the old triggers would later ask FTS5 to delete a row it does not hold."""
    from django.db.migrations.executor import MigrationExecutor

    ours, _ = conversations
    question = add(ours, "Tell me about otters")
    Message.objects.create(
        conversation=ours, position=1, role="assistant", content="Otters swim", draft=True
    )
    reply_pk = Message.objects.get(position=1, conversation=ours).pk
    executor = MigrationExecutor(connection)
    latest = executor.loader.graph.leaf_nodes("rojos")
    try:
        executor.migrate([("rojos", "0019_pending_approvals")])
        assert indexed_ids() == {question.pk, reply_pk}
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(latest)
