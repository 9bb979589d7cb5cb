"""Turns an earlier life of this process left running, ended at start-up.

Which process owns a claim, and whether it is gone, is read in rojos.models.claims.
"""

import asyncio
import logging
import threading

from roject.server.db_threads import db_context
from rojos.models import Conversation
from rojos.models.claims import owner_gone, owner_host

logger = logging.getLogger(__name__)


async def turns_of_past_lives_end() -> int:
    """End, as interrupted, every turn whose claim names a gone process of this host.

    Run once at start-up: a restarted process ends the turns it ran before at once, rather
    than leaving their conversations locked until the claims go stale. Returns how many.
    """
    from rojos.turns.repair import dead_turn_end

    prefix = owner_host() + ":"
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


def running_turns_refusal(*, using: str) -> str | None:
    """A restore check (ROJO_RESTORE_CHECKS): why a restore must wait while replies run on
    this installation's servers (a claim with a fresh heartbeat). A running reply goes on
    writing by the ids it holds, into rows the restore replaces, which may be someone
    else's then; the servers are to be stopped first (docs/operations.md)."""
    running = Conversation.objects.using(using).running().count()
    if not running:
        return None
    replies = "1 reply is" if running == 1 else f"{running} replies are"
    return (
        f"{replies} running on this installation's servers, and would write into the "
        "restored rows; stop the servers first (manage.py serve lets running replies "
        "finish as it stops)"
    )


def restored_turns_end() -> None:
    """A restore hook (ROJO_RESTORE_HOOKS): end, as interrupted, every turn a backup caught
    running. No process of the restored installation runs it, and its claim may name a
    process of this host that still lives (the one the backup was taken beside): it would
    hold its conversation until the claim went stale. Its text so far (a draft) is kept,
    its open calls answered and its cut-off changes' files repaired, as for any dead turn."""
    from asgiref.sync import sync_to_async
    from django.db import connections
    from django.db.models import Q

    from rojos.turns.repair import dead_turn_end

    async def end_all() -> int:
        ended = 0
        try:
            async for conversation in Conversation.objects.filter(turn_id__isnull=False):
                # An empty filter: the claim is dead as long as it is still this turn's.
                if await dead_turn_end(conversation, silent=Q()):
                    ended += 1
        finally:
            # The thread these queries ran on outlives the loop: its connection goes now.
            await sync_to_async(connections.close_all)()
        return ended

    ended = asyncio.run(end_all())
    if ended:
        logger.warning("ended %s turn(s) the backup caught running", ended)
