"""A reply's store held at the database while a test acts (a Stop as the reply is stored)."""

import contextlib
import threading
from collections.abc import Iterator

from django.db import connection, transaction

from rojos.models import Conversation
from tests.support.live_server import wait_until


@contextlib.contextmanager
def message_store_held(
    conversation: int, crossings: list[str], release: threading.Event
) -> Iterator[None]:
    """Lock the conversation's rows (SQLite: the whole database; PostgreSQL: the messages
    table too), then set `release` (the fake provider's Gate holding the reply) and give
    the test its turn once the reply's store was sent to a database thread, where it waits
    for the lock until the block ends."""
    with transaction.atomic():
        Conversation.objects.filter(pk=conversation).update(title="held")
        if connection.vendor == "postgresql":  # SQLite's write lock holds inserts already
            with connection.cursor() as cursor:
                cursor.execute("LOCK TABLE rojos_message IN SHARE ROW EXCLUSIVE MODE")
        before = len(crossings)
        release.set()
        wait_until(lambda: "History._insert" in crossings[before:], timeout=60)
        yield
