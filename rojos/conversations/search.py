"""Full-text search of conversation titles and messages, in the projects a user belongs to.

The database's own index, never a LIKE scan: SQLite's FTS5 tables `rojos_message_fts` and
`rojos_conversation_fts` (kept in sync by triggers), PostgreSQL's GIN indexes on stored
`search_vector` columns (`to_tsvector('simple', ...)`); both made by migration 0016. Both
tokenise words without stemming; every word of the query must match, the last one as a
prefix (search as you type).
Only user and assistant messages are indexed: tool results are file contents. Hits come
newest first (by id), which lets both databases stop at the limit for a common word instead
of ranking every match.
"""

import re
from dataclasses import dataclass

from django.db import connection

from roject.members.selectors import membership_project_ids

LIMIT = 30
_WORD = re.compile(r"[^\W_]+")
_SNIPPET = 140


@dataclass(frozen=True, slots=True)
class SearchHit:
    """A conversation whose title matched (message None), or one of its messages."""

    conversation: int
    title: str
    project: int
    project_name: str
    message: int | None
    snippet: str


def _words(query: str) -> list[str]:
    return _WORD.findall(query.lower())[:8]


def _match(words: list[str], vendor: str) -> str:
    if vendor == "postgresql":
        return " & ".join([*words[:-1], f"{words[-1]}:*"])
    return " ".join([*(f'"{w}"' for w in words[:-1]), f'"{words[-1]}"*'])


_SQL = {
    "sqlite": {
        "titles": "SELECT c.id, c.title, c.project_id, p.name, NULL, c.title "
        "FROM rojos_conversation_fts f JOIN rojos_conversation c ON c.id = f.rowid "
        "JOIN roject_project p ON p.id = c.project_id "
        "WHERE rojos_conversation_fts MATCH %s AND c.project_id IN ({projects}) "
        "ORDER BY f.rowid DESC LIMIT %s",
        "messages": "SELECT c.id, c.title, c.project_id, p.name, m.id, m.content "
        "FROM rojos_message_fts f JOIN rojos_message m ON m.id = f.rowid "
        "JOIN rojos_conversation c ON c.id = m.conversation_id "
        "JOIN roject_project p ON p.id = c.project_id "
        "WHERE rojos_message_fts MATCH %s AND c.project_id IN ({projects}) "
        "ORDER BY f.rowid DESC LIMIT %s",
    },
    "postgresql": {
        "titles": "SELECT c.id, c.title, c.project_id, p.name, NULL, c.title "
        "FROM rojos_conversation c JOIN roject_project p ON p.id = c.project_id "
        "WHERE c.search_vector @@ to_tsquery('simple', %s) "
        "AND c.project_id IN ({projects}) ORDER BY c.id DESC LIMIT %s",
        "messages": "SELECT c.id, c.title, c.project_id, p.name, m.id, m.content "
        "FROM rojos_message m JOIN rojos_conversation c ON c.id = m.conversation_id "
        "JOIN roject_project p ON p.id = c.project_id "
        "WHERE m.search_vector @@ to_tsquery('simple', %s) "
        "AND c.project_id IN ({projects}) ORDER BY m.id DESC LIMIT %s",
    },
}


def snippet_of(text: str, words: list[str]) -> str:
    """About 140 characters of `text` around the first word of the query found in it."""
    line = " ".join((text or "").split())
    lowered = line.lower()
    found = min((i for w in words if (i := lowered.find(w)) >= 0), default=0)
    start = max(0, found - _SNIPPET // 3)
    piece = line[start : start + _SNIPPET]
    return ("…" if start else "") + piece + ("…" if start + _SNIPPET < len(line) else "")


def conversation_search(*, user, query: str, project_id: int | None = None) -> list[SearchHit]:
    """(Blocking) Conversations whose title, then messages whose text, match every word of
    `query`, in the user's projects (or the one project of theirs named): three queries.

    The projects are read first and given as values, not a subquery: with them the planner
    knows how many conversations they hold, and PostgreSQL picks the index that fits the
    word (the GIN index for a rare one, newest messages first for a common one).
    """
    words = _words(query)
    if not words or user is None or not user.is_authenticated:
        return []
    params = membership_project_ids(user=user)
    if project_id is not None:
        params = [p for p in params if p == project_id]
    if not params:
        return []
    vendor = connection.vendor if connection.vendor in _SQL else "sqlite"
    projects = ", ".join(["%s"] * len(params))
    match = _match(words, vendor)
    hits: list[SearchHit] = []
    with connection.cursor() as cursor:
        for part in ("titles", "messages"):
            cursor.execute(_SQL[vendor][part].format(projects=projects), [match, *params, LIMIT])
            hits.extend(
                SearchHit(
                    conversation=row[0],
                    title=row[1],
                    project=row[2],
                    project_name=row[3],
                    message=row[4],
                    snippet=snippet_of(row[5], words),
                )
                for row in cursor.fetchall()
            )
    return hits
