"""Full-text search of titles and messages, on the database's own index (SQLite FTS5 or
PostgreSQL tsvector: run this module with DATABASE_URL set for the latter)."""

import pytest
from django.db import connection

from roject.services import project_create
from rojos.models import Conversation, Message
from rojos.search import conversation_search

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
