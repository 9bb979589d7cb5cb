"""7. Conversations: search and the list with 5,000 conversations in one project.

50,000 messages (ten per conversation, words drawn from a vocabulary of 2,000 so that some words are
common and some rare), stored once; then the full-text search (rojos.conversations.search) for a
common word, a rare one, a prefix and two words, the list's first and 100th page (keyset), and the
badges' status query, each timed over repeated runs in this process's database.
"""

import random
import statistics
import time
from dataclasses import dataclass

from django.db import connection

from .env import project_new
from .report import Section

CONVERSATIONS = 5_000
MESSAGES_EACH = 10
SEARCH_MS_MAX = 100.0
PAGE_MS_MAX = 50.0
_VOCABULARY = [f"w{n:04d}" for n in range(2_000)]


@dataclass
class Timing:
    name: str
    p50_ms: float
    max_ms: float
    results: int


def _fill(project, user) -> None:
    from rojos.models import Conversation, Message

    rng = random.Random(7)
    rows = Conversation.objects.bulk_create(
        Conversation(project=project, user=user, title=" ".join(rng.choices(_VOCABULARY, k=5)))
        for _ in range(CONVERSATIONS)
    )
    batch = []
    for conversation in rows:
        for position in range(MESSAGES_EACH):
            # Zipf-like: low-numbered words are common, high-numbered ones rare.
            words = [_VOCABULARY[min(int(rng.paretovariate(0.6)) - 1, 1999)] for _ in range(30)]
            batch.append(
                Message(
                    conversation=conversation,
                    position=position,
                    role="user" if position % 2 == 0 else "assistant",
                    content=" ".join(words),
                )
            )
        if len(batch) >= 5_000:
            Message.objects.bulk_create(batch)
            batch = []
    Message.objects.bulk_create(batch)
    if connection.vendor == "postgresql":  # as autovacuum would after a load this size
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE rojos_message; ANALYZE rojos_conversation")


def _timed(name: str, run, repeat: int = 15) -> Timing:
    run()  # warm the caches once
    times, results = [], 0
    for _ in range(repeat):
        started = time.perf_counter()
        results = len(run())
        times.append((time.perf_counter() - started) * 1000)
    return Timing(name, statistics.median(times), max(times), results)


def conversations_bench(user) -> list[Timing]:
    """Fill a project, then time the searches, the pages and the status query."""
    from rojos.conversations.listing import conversation_page, conversation_statuses, cursor_of
    from rojos.conversations.search import conversation_search

    project = project_new("conversations")
    started = time.perf_counter()
    _fill(project, user)
    print(f"stored {CONVERSATIONS:,} conversations in {time.perf_counter() - started:.0f} s")
    deep = conversation_page(project=project)
    for _ in range(98):  # to the 99th page of 50: the 100th is the last
        deep = conversation_page(project=project, before=cursor_of(deep[-1]))
    cursor = cursor_of(deep[-1])
    ids = [c.pk for c in conversation_page(project=project)]
    searches = {
        "search_common_word": "w0000",
        "search_rare_word": "w1500",
        "search_prefix": "w00",
        "search_two_words": "w0001 w0002",
    }
    timings = [
        _timed(name, lambda q=query: conversation_search(user=user, query=q))
        for name, query in searches.items()
    ]
    timings.append(_timed("list_first_page", lambda: conversation_page(project=project)))
    timings.append(
        _timed("list_page_100", lambda: conversation_page(project=project, before=cursor))
    )
    timings.append(
        _timed("status_of_a_page", lambda: conversation_statuses(project=project, ids=ids))
    )
    return timings


def conversations_section(timings: list[Timing]) -> Section:
    section = Section(
        "7. Conversations",
        f"{CONVERSATIONS:,} conversations of {MESSAGES_EACH} messages in one project, in this "
        "run's database; each figure the median of 15 runs after a warm-up (max in the note). "
        "Searches use the database's full-text index (FTS5 or tsvector), at most 30 title and "
        "30 message hits; pages are keyset pages of 50. BENCH_DATABASE_URL=postgres://... "
        "measures PostgreSQL's (a fresh database: the run migrates it).",
    )
    for t in timings:
        bound = SEARCH_MS_MAX if t.name.startswith("search") else PAGE_MS_MAX
        section.add(
            t.name,
            f"{t.p50_ms:.1f} ms",
            f"< {bound:.0f} ms",
            t.p50_ms < bound,
            f"max {t.max_ms:.1f} ms, {t.results} results",
        )
    return section
