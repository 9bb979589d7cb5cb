"""The requests of one turn: built from the history, sent, and what each response used.

Before the first, the rojo's window is learned from its provider if nobody declared it.
A provider that refuses `stream_options` gets the request again without it, and the rojo
remembers that (a quirk like the others, learned rather than configured). Each response's
usage is recorded (`UsageRecord`), and calibrates the estimate of the next request's size.
"""

import contextlib
import logging
from collections.abc import AsyncIterator

import openai

from .context_window import (
    DEFAULT_CHARS_PER_TOKEN,
    calibrated,
    item_chars,
    tokens_of,
    tools_chars,
)
from .history import History
from .models import Message, Rojo, UsageRecord
from .provider import provider_chunks
from .provider_refusals import OptionRefused
from .provider_request import build_request
from .stream_accumulator import Completion
from .tools import RojoToolContext
from .usage import UsageCounts, usage_cost, usage_counts
from .window_discovery import window_learn

logger = logging.getLogger(__name__)

# A calibration that moved less than this is not worth a write.
_RECALIBRATE = 0.05


class TurnRequests:
    """Builds, sends and accounts for each model request of one turn."""

    def __init__(
        self,
        *,
        rojo: Rojo,
        history: History,
        tools: list[dict],
        client: openai.AsyncOpenAI,
        ctx: RojoToolContext,
    ) -> None:
        self.rojo = rojo
        self.history = history
        self.tools = tools
        self.client = client
        self.ctx = ctx
        self.tools_chars = tools_chars(tools)
        self.sent_chars = 0  # the size of the last request sent, for calibration
        self.stored_ratio = rojo.chars_per_token
        self.opened = False

    @property
    def chars_per_token(self) -> float:
        return self.rojo.chars_per_token or DEFAULT_CHARS_PER_TOKEN

    def _request(self) -> dict:
        request = build_request(self.rojo, self.history, self.tools)
        self.sent_chars = sum(map(item_chars, request["messages"])) + self.tools_chars
        return request

    async def stream(self) -> AsyncIterator[list[dict]]:
        """The chunks of the step's response, a list per network read."""
        if not self.opened:
            self.opened = True
            await window_learn(self.rojo)
        request = self._request()
        refused = False
        while True:
            started = False
            try:
                async with contextlib.aclosing(provider_chunks(self.client, request)) as chunks:
                    async for batch in chunks:
                        started = True
                        yield batch
                return
            except OptionRefused:
                if started or refused or "stream_options" not in request:
                    raise
                refused = True
                await self._stream_options_refused()
                request.pop("stream_options")

    async def _stream_options_refused(self) -> None:
        logger.info("rojo %s: the provider refused stream_options; usage is estimated", self.rojo)
        self.rojo.stream_usage_refused = True
        await Rojo.objects.filter(pk=self.rojo.pk).aupdate(stream_usage_refused=True)

    def _estimated(self, completion: Completion) -> UsageCounts:
        out = len(completion.text) + sum(
            len(call["function"]["arguments"]) for call in completion.tool_calls
        )
        return UsageCounts(
            prompt=tokens_of(self.sent_chars, self.chars_per_token),
            completion=tokens_of(out, self.chars_per_token),
            reported=False,
        )

    async def account(
        self,
        completion: Completion,
        message: Message | None,
        kind: UsageRecord.Kind = UsageRecord.Kind.REPLY,
    ) -> UsageRecord:
        """Record what the response used (the provider's count, else an estimate)."""
        counts = usage_counts(completion.usage) or self._estimated(completion)
        if counts.reported:
            self.rojo.chars_per_token = calibrated(
                self.rojo.chars_per_token, self.sent_chars, counts.prompt
            )
        if not completion.tool_calls:  # the turn's last response
            await self._calibration_save()
        return await UsageRecord.objects.acreate(
            user=self.ctx.user if getattr(self.ctx.user, "pk", None) else None,
            project_id=self.ctx.project_id,
            rojo=self.rojo,
            conversation=self.history.conversation,
            message=message if message is not None and message.pk else None,
            kind=kind,
            prompt_tokens=counts.prompt,
            completion_tokens=counts.completion,
            cached_tokens=counts.cached,
            reasoning_tokens=counts.reasoning,
            reported=counts.reported,
            cost=usage_cost(self.rojo, counts),
        )

    async def _calibration_save(self) -> None:
        """Store the ratio when it moved since it was loaded: once a turn at most."""
        before, after = self.stored_ratio, self.rojo.chars_per_token
        if after is None or (before and abs(after - before) / before <= _RECALIBRATE):
            return
        self.stored_ratio = after
        await Rojo.objects.filter(pk=self.rojo.pk).aupdate(chars_per_token=after)
