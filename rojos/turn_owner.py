"""Which process owns a running turn, and whether that process is gone.

A turn's claim names its owner: the host (with its PID namespace, so that two containers of
one name do not compare PIDs), the process id and a token drawn when the process started.
A claim whose owner is a process of this host that no longer runs, or this very process in
an earlier life (a restart that got the same PID), is dead at once; a claim owned on another
host is dead when its heartbeat is stale (rojos.turn_claims).
"""

import asyncio
import logging
import os
import socket
import threading
import uuid

from roject.db_threads import db_context

logger = logging.getLogger(__name__)


def _host() -> str:
    try:
        namespace = os.readlink("/proc/self/ns/pid")  # e.g. "pid:[4026531836]"
    except OSError:
        namespace = ""
    return f"{socket.gethostname()}/{namespace}"


_BOOT = uuid.uuid4().hex[:12]


def process_owner() -> str:
    """This process's name for the claims it makes: host/namespace:pid:boot token."""
    return f"{_host()}:{os.getpid()}:{_BOOT}"


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
    if parts is None or parts[0] != _host():
        return False
    _, pid, boot = parts
    if pid == os.getpid():
        return boot != _BOOT  # an earlier life of this PID
    return not _pid_alive(pid)


def owner_alive_here(owner: str) -> bool:
    """Whether `owner` is a process of this host that still runs (its PID may, rarely, be
    another's by now: callers still give such a claim a longer limit)."""
    parts = _parts(owner or "")
    return parts is not None and parts[0] == _host() and not owner_gone(owner)


async def turns_of_past_lives_end() -> int:
    """End, as interrupted, every turn whose claim names a gone process of this host.

    Run once at start-up: a restarted process ends the turns it ran before at once, rather
    than leaving their conversations locked until the claims go stale. Returns how many.
    """
    from .models import Conversation  # the models import this module
    from .turn_repair import dead_turn_end

    prefix = _host() + ":"
    claims = Conversation.objects.filter(turn_id__isnull=False, turn_owner__startswith=prefix)
    ended = 0
    async for conversation in claims:
        if owner_gone(conversation.turn_owner) and await dead_turn_end(conversation):
            ended += 1
    return ended


def turns_of_past_lives_end_soon() -> None:
    """Start `turns_of_past_lives_end` on a thread of its own (the server starts meanwhile);
    a database out of reach now leaves the claims to go stale instead."""

    async def in_db_context() -> int:
        async with db_context():
            return await turns_of_past_lives_end()

    def run() -> None:
        try:
            ended = asyncio.run(in_db_context())
        except Exception:  # best effort, off the request path: the claims go stale anyway
            logger.warning("could not end the turns of an earlier life", exc_info=True)
            return
        if ended:
            logger.warning("ended %s turn(s) an earlier process left running", ended)

    threading.Thread(target=run, name="turns-of-past-lives", daemon=True).start()
