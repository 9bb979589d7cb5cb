"""Per-user limits on turns: messages per minute and replies running at once (runaway cost).

They are counted in the transaction that starts the turn, after taking a lock that every
start of the same user takes, so two starts never both count the same free place: the turn
record the start stores is what the next start counts. Measured before: 40 parallel
messages of one user started 38 turns against a limit of 20.
"""

from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models import Count, Q
from django.utils import timezone

from rojos.errors import TurnLimited
from rojos.models import Conversation, TurnRecord


def turn_limits_check(*, user) -> None:
    """(Blocking, in the transaction that stores the turn) Raise TurnLimited when the user
    is over a per-user limit.

    Both limits are counted in one query over the user's recent and running turns, once the
    user's lock is held (user_start_lock).
    """
    per_minute = settings.ROJO_USER_MESSAGES_PER_MINUTE
    at_once = settings.ROJO_USER_CONCURRENT_TURNS
    if not per_minute and not at_once:
        return
    user_start_lock(user)
    recent = Q(started__gte=timezone.now() - timedelta(minutes=1))
    running = Q(status=TurnRecord.Status.RUNNING, conversation__in=Conversation.objects.running())
    counts = TurnRecord.objects.filter(recent | running, user=user).aggregate(
        recent=Count("pk", filter=recent), running=Count("pk", filter=running)
    )
    if per_minute and counts["recent"] >= per_minute:
        raise TurnLimited(
            f"You have sent {per_minute} {'message' if per_minute == 1 else 'messages'} "
            "in the last minute, the most allowed; "
            "wait a moment and send again."
        )
    if at_once and counts["running"] >= at_once:
        raise TurnLimited(
            f"You already have {at_once} {'reply' if at_once == 1 else 'replies'} running, "
            "the most allowed at once; "
            "wait for one to finish or stop it."
        )


def user_start_lock(user) -> None:
    """Hold the user's start lock until the transaction ends, across server processes.

    PostgreSQL: the user's row, FOR NO KEY UPDATE (rows that refer to the user can still be
    inserted). The count must be a statement of its own after this one: a statement that
    waited for the lock still reads what was there before it waited. SQLite's transactions
    begin IMMEDIATE (roject/sqlite_backend), holding the database's write lock already.
    """
    if not connection.in_atomic_block:
        raise RuntimeError("per-user limits are counted in the transaction that starts the turn")
    if connection.features.has_select_for_update:
        locked = get_user_model().objects.select_for_update(
            no_key=connection.features.has_select_for_no_key_update
        )
        list(locked.filter(pk=user.pk).values_list("pk"))
