"""A turn's summary of its oldest turns, when the window needs one (rojos.context.summaries):
requests of its own to the turn's model, without tools, each read to its end, and the summary
stored in the history. They are the turn's requests all the same: counted in its usage, and
learnt from as a step's are (`TurnRequests`)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

from rojos.agent.events import SummaryEvent
from rojos.context.compaction import SUMMARY_MAX_CHARS, latest_summary
from rojos.context.summaries import (
    SUMMARY_INSTRUCTION,
    summary_extra,
    summary_messages,
    transcript_parts,
)
from rojos.context.window import item_chars
from rojos.models import Message, UsageRecord
from rojos.provider.accumulator import StreamAccumulator
from rojos.provider.completion import Completion
from rojos.provider.refusals import ContextOverflow, OptionRefused
from rojos.provider.stream import provider_chunks
from rojos.whole import whole

if TYPE_CHECKING:
    from rojos.agent.requests import TurnRequests


async def summary_make(
    requests: TurnRequests, messages: list[Message], budget: int
) -> SummaryEvent:
    """Summarise `messages` (the oldest turns) and store the summary; its event."""
    history, usage = requests.history, requests.usage
    previous = latest_summary(history.messages)
    text = previous.content if previous is not None else None
    part_chars = max(budget - len(SUMMARY_INSTRUCTION) - SUMMARY_MAX_CHARS, 2_000)
    completions: list[tuple[Completion, int]] = []
    try:
        for part in transcript_parts(messages, part_chars):
            completion = await _complete(requests, summary_messages(part, text))
            text = completion.text.strip()[:SUMMARY_MAX_CHARS] or text
            completions.append((completion, usage.sent_chars))
        index = history.messages.index(messages[-1]) + 1
        until = next(
            (m.position for m in history.messages[index:] if m.role == Message.Role.USER),
            messages[-1].position + 1,
        )
        message = await history.add(
            role=Message.Role.SUMMARY,
            content=text or "",
            extra=summary_extra(until, messages),
        )
    except BaseException:  # the parts read before a stop or failure were billed too
        await whole(usage.account_summary(completions, None))
        raise
    await usage.account_summary(completions, message)  # counted in its turn
    return SummaryEvent(text=message.content or "", messages=len(messages))


async def _complete(requests: TurnRequests, messages: list[dict]) -> Completion:
    """One request without tools, read to its end, read as a step's is: its text without
    the thinking of a model that thinks from its prompt, `stream_options` dropped (and
    remembered) where the provider refuses them, and a refusal as too long learnt from.
    A summary may be a turn's first request: failing on a refusal without learning from
    it, the turn would leave every later turn to fail the same way."""
    request = {**(requests.rojo.request_options or {}), "model": requests.model.name}
    request.update(messages=messages, stream=True)
    if not requests.model.stream_usage_refused:
        request["stream_options"] = {"include_usage": True}
    requests.usage.sent_chars = sum(map(item_chars, messages))
    while True:
        try:
            return await _read(requests, request)
        except OptionRefused:  # refused before any chunk: nothing read is lost
            if "stream_options" not in request:
                raise
            await requests.stream_options_refused()
            request.pop("stream_options")
        except ContextOverflow as exc:
            # Made to fit a window guessed too large (a refusal that stated none): learnt
            # from as a step's refusal is, or the next turn would send it again.
            await requests.overflowed(exc)
            raise requests.overflow_error() from exc


async def _read(requests: TurnRequests, request: dict) -> Completion:
    """One summary request read to its end; what one cut short used is counted."""
    accumulator = StreamAccumulator(think_opened=requests.think_opened)
    began = asyncio.Event()  # the provider took the request: it bills it
    try:
        chunks = provider_chunks(requests.client, request, opened=began.set, fixes=requests.fixes)
        async with accumulator.whole_if_broken(), contextlib.aclosing(chunks):
            async for batch in chunks:
                for chunk in batch:
                    accumulator.feed(chunk)
        return accumulator.result()
    except BaseException as exc:
        if began.is_set():
            kind, stopped = UsageRecord.Kind.SUMMARY, isinstance(exc, asyncio.CancelledError)
            await whole(requests.usage.account_unfinished(accumulator, None, kind, stopped=stopped))
        raise
