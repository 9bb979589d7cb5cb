"""A step's assistant message while it streams: saved now and then, as appends."""

import asyncio
import logging
import time

from asgiref.sync import sync_to_async
from django.db import DatabaseError
from django.db.models import Value
from django.db.models.functions import Concat, Substr

from rojos.agent.history import History
from rojos.db import db_retrying
from rojos.errors import DatabaseUnreachable
from rojos.models import Message
from rojos.whole import whole

logger = logging.getLogger(__name__)


class Draft:
    """A step's assistant message while it streams, saved every so often.

    The user sees text as it arrives; saving it now and then (not per chunk: one write per
    interval) means a crashed process loses at most the last interval of it. Drafts are
    written in the background, so the stream never waits on the database. A draft is stored
    marked as one (Message.draft), which keeps the search index from re-indexing the whole
    growing text at every save; the final save clears the marker.

    Each save appends the text that came since the one before (`save_soon` takes it from
    the accumulator, which then gives it up), so until the reply ends its text is held by
    the database and by the turn's kept events, not also here: saving the whole text so far
    each time kept a second copy of every long reply in memory (ten replies of 0.8 MB: 8
    MiB, docs/performance.md, section 8). The append is idempotent (the stored text is cut
    to what this draft knows it wrote before the new text goes after it), so a write
    retried after a lost acknowledgement does not repeat the text.
    """

    def __init__(self, history: History, every: float) -> None:
        self.history = history
        self.every = every
        self.message: Message | None = None
        self.stored = 0  # the characters of the text the stored draft holds
        self.unstored = ""  # text taken for a draft whose write failed: the next one's
        self.saved_at = time.monotonic()
        self.pending: asyncio.Task | None = None

    def due(self) -> bool:
        """Whether the interval has passed and no save is running: checked on every chunk."""
        if time.monotonic() - self.saved_at < self.every:
            return False
        return self.pending is None or self.pending.done()

    def started(self) -> bool:
        """Whether any text went to a draft: the reply's end must then be saved as well."""
        return self.message is not None or bool(self.unstored)

    def save_soon(self, text: str) -> None:
        """Start storing `text`, what came since the last draft, in the background."""
        self.saved_at = time.monotonic()
        self.unstored += text
        self.pending = asyncio.ensure_future(self._draft())

    async def _draft(self) -> None:
        text = self.unstored
        try:
            await self._write(text, draft=True)
        except (DatabaseError, DatabaseUnreachable):
            logger.warning("could not save a draft of the reply", exc_info=True)
        else:
            self.unstored = self.unstored[len(text) :]

    async def save(self, text: str, **fields) -> Message:
        """Store the message with `text` after what the drafts stored (after any draft
        being written), and `fields`: the reply's end (whole, stopped or failed), so no
        longer a draft. The message then holds the whole text.

        When the database stays out of reach, the text is kept for the turn's end to store
        (History.unsaved), and DatabaseUnreachable raised.
        """
        if self.pending is not None:
            await whole(self.pending)
        text = self.unstored + text
        try:
            return await self._write(text, **fields, draft=False)
        except DatabaseUnreachable:
            if text:
                self.history.unsaved = (self.message, text, self.stored)
            raise

    async def _write(self, text: str, **fields) -> Message:
        if self.message is None:
            content = text or None
            self.message = await self.history.add(
                role=Message.Role.ASSISTANT, content=content, **fields
            )
        else:
            pk, stored, ending = self.message.pk, self.stored, not fields.get("draft")
            whole = await db_retrying(
                lambda: sync_to_async(draft_append_blocking)(
                    pk, text, after=stored, whole=ending, **fields
                )
            )
            for name, value in fields.items():
                setattr(self.message, name, value)
            if ending:
                self.message.content = whole
        self.stored += len(text)
        return self.message


def draft_append_blocking(
    pk: int, text: str, *, after: int, whole: bool = False, **fields
) -> str | None:
    """(Blocking) Put `text` after the first `after` characters of a stored draft's text,
    and set `fields`: one UPDATE; then, with `whole`, read the whole text back."""
    content = Concat(Substr("content", 1, after), Value(text)) if after else Value(text)
    Message.objects.filter(pk=pk).update(content=content, **fields)
    if whole:
        return Message.objects.filter(pk=pk).values_list("content", flat=True).first()
    return None
