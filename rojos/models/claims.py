"""A conversation's claim read: which process holds it, and whether the claim is dead.

A turn's claim (rojos.turns.claims) names its owner: the host (with its PID namespace, so
that two containers of one name do not compare PIDs), the process id and a token drawn when
the process started. A claim whose owner is a process of this host that no longer runs, or
this very process in an earlier life (a restart that got the same PID), is dead at once; a
claim owned on another host is dead when its heartbeat is stale. The models read it here
(`Conversation.running`), below everything that claims.
"""

import os
import socket
import uuid
from datetime import timedelta
from typing import TYPE_CHECKING

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

if TYPE_CHECKING:
    from .conversation import Conversation

# A claim of a process that still runs on this host is stale only after this many times the
# stale age: a beat delayed by the database (an outage just over) is no death, while a PID
# that another process got since cannot hold a conversation for ever.
ALIVE_HERE_FACTOR = 10


def owner_host() -> str:
    """This host's name with its PID namespace, as claims name it."""
    try:
        namespace = os.readlink("/proc/self/ns/pid")  # e.g. "pid:[4026531836]"
    except OSError:
        namespace = ""
    return f"{socket.gethostname()}/{namespace}"


_BOOT = uuid.uuid4().hex[:12]


def process_owner() -> str:
    """This process's name for the claims it makes: host/namespace:pid:boot token."""
    return f"{owner_host()}:{os.getpid()}:{_BOOT}"


def _parts(owner: str) -> tuple[str, int, str] | None:
    try:
        head, pid, boot = owner.rsplit(":", 2)
        return head, int(pid), boot
    except ValueError:
        return None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True


def owner_gone(owner: str) -> bool:
    """Whether the process named by `owner` is known to be gone (False when it cannot be
    known here: another host, or no owner recorded)."""
    parts = _parts(owner or "")
    if parts is None or parts[0] != owner_host():
        return False
    _, pid, boot = parts
    if pid == os.getpid():
        return boot != _BOOT  # an earlier life of this PID
    return not _pid_alive(pid)


def owner_alive_here(owner: str) -> bool:
    """Whether `owner` is a process of this host that still runs (its PID may, rarely, be
    another's by now: callers still give such a claim a longer limit)."""
    parts = _parts(owner or "")
    return parts is not None and parts[0] == owner_host() and not owner_gone(owner)


def dead_claim(conversation: "Conversation") -> Q | None:
    """A filter matching the conversation's claim for as long as it stays the dead one it is
    now (its owner gone, or its heartbeat stale); None when no claim or a live one."""
    if conversation.turn_id is None:
        return None
    claim = Q(turn_id=conversation.turn_id)
    if owner_gone(conversation.turn_owner):
        return claim & Q(turn_owner=conversation.turn_owner)
    seconds = settings.ROJO_TURN_STALE_SECONDS
    if owner_alive_here(conversation.turn_owner):
        seconds *= ALIVE_HERE_FACTOR
    stale = timezone.now() - timedelta(seconds=seconds)
    if conversation.turn_heartbeat is None or conversation.turn_heartbeat < stale:
        return claim & (Q(turn_heartbeat__lt=stale) | Q(turn_heartbeat__isnull=True))
    return None
