"""Per-user limits on turns: messages per minute and replies running at once (runaway cost)."""

from datetime import timedelta

from django.conf import settings
from django.db.models import Count, Q
from django.utils import timezone

from .errors import TurnLimited
from .models import Conversation, TurnRecord


def turn_limits_check(*, user) -> None:
    """(Blocking) Raise TurnLimited when the user is over a per-user limit: runaway cost.

    Both limits are counted in one query over the user's recent and running turns.
    """
    per_minute = settings.ROJO_USER_MESSAGES_PER_MINUTE
    at_once = settings.ROJO_USER_CONCURRENT_TURNS
    if not per_minute and not at_once:
        return
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
