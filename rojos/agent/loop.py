"""The agent loop: one user message in, model steps and tool runs out, as a stream of events."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING

from django.conf import settings
from django.utils.translation import ngettext

from rojos.agent.drafts import Draft
from rojos.agent.events import AgentEvent, ChatEvent, NoticeEvent, ToolCallEvent
from rojos.agent.history import History
from rojos.agent.requests import TurnRequests
from rojos.agent.thinking import Thinking
from rojos.agent.tool_call_deltas import ToolCallDeltas
from rojos.agent.tool_calls import Approver, ToolCallRunner
from rojos.context.budgets import Left
from rojos.context.model_choice import ModelInUse, model_default
from rojos.errors import ProviderError, ReplyCutOff, StepLimitReached
from rojos.models import Message, Rojo
from rojos.provider.accumulator import StreamAccumulator
from rojos.provider.body import Idle
from rojos.provider.completion import Completion
from rojos.provider.request import reasoning_extra, sent_back_extra
from rojos.tools import RojoToolContext, RojoToolRegistry, ToolCall, registry
from rojos.whole import whole

# The SDK (openai, over a second to import) only for annotations here; where it is used, it
# is imported then: the URLconf reaches this module, so every management command would pay
# for it. A server imports it at start (rojos/eager.py).
if TYPE_CHECKING:
    import openai

logger = logging.getLogger(__name__)


def _late_notice(error: ProviderError | None) -> NoticeEvent | None:
    """What the user is told of a failure after the response finished (whole_if_broken):
    the provider said something went wrong, yet the reply stands."""
    if error is None:
        return None
    if error.said is not None:
        message = f"After this reply had finished, the provider reported an error: {error.said}"
    else:
        message = f"After this reply had finished, the provider's stream failed: {error}"
    return NoticeEvent(
        message=f"{message.rstrip('.')}. The reply is whole and kept.", code="late_error"
    )


def _empty_notice(completion: Completion, *, drafted: bool) -> NoticeEvent | None:
    """What the user is told of a finished reply with nothing in it (no text, no thinking,
    no call): without it the turn ended showing nothing at all. `drafted`: text went to a
    draft already (the completion holds only what came since). One cut off by its length
    has an error of its own (_cut_off)."""
    if drafted or completion.text.strip() or completion.tool_calls or completion.reasoning:
        return None
    if completion.finish_reason == "length":
        return None
    why = completion.finish_reason
    told = f" (the provider's finish reason: {why})" if why not in (None, "stop") else ""
    return NoticeEvent(
        message=f"The model's reply was empty{told}: no text and no tool call. Send the "
        "message again, or try another model.",
        code="empty_reply",
    )


async def _store_completion(
    draft: Draft,
    completion: Completion,
    rojo: Rojo,
    thinking: Thinking,
    model: str,
    notice: NoticeEvent | None,
) -> tuple[Completion, Message]:
    """Store the step's response (`model`: the model that wrote it) with its `notice`; the
    completion with the whole text (what the drafts took of it and the rest), and its
    message."""
    extra = sent_back_extra(completion.extra, completion.tool_calls, model)
    reasoning = reasoning_extra(rojo, completion, model=model)
    late = {notice.code: notice.message} if notice is not None else {}
    message = await draft.save(
        completion.text,
        tool_calls=completion.tool_calls or None,
        reasoning=completion.reasoning,
        extra={**extra, **thinking.extra(), **reasoning, **late},
        usage=completion.usage,
        model=model,
    )
    return dataclasses.replace(completion, text=message.content or ""), message


async def _stored_counted(
    draft: Draft,
    completion: Completion,
    rojo: Rojo,
    thinking: Thinking,
    requests: TurnRequests,
    model: str,
    notice: NoticeEvent | None,
) -> tuple[Completion, Message]:
    """Store the step's whole response and record what it used, as one: a Stop that comes
    between the two would keep the reply uncounted (the store finishes a cancelled insert,
    rojos.agent.history), a way past a budget for whoever stops each reply as it ends."""
    completion, message = await _store_completion(draft, completion, rojo, thinking, model, notice)
    await requests.usage.account(completion, message)
    return completion, message


async def _unfinished_kept(
    draft: Draft,
    accumulator: StreamAccumulator,
    requests: TurnRequests,
    model: str,
    stopped: bool,
) -> None:
    """What a step the turn's end cut short leaves: the text and thinking the user already
    saw (an unfinished call is dropped), and, once the provider took the request (its answer
    began, a chunk or not), what the response used (it bills a stopped, cut or failed
    response all the same; `stopped`: a Stop or a client gone, not a failure). Awaited
    whole (rojos.whole), so that a second cancel cannot keep the text and lose the count."""
    reasoning = accumulator.reasoning
    kept = None
    if accumulator.text or draft.started() or reasoning:
        kept = await draft.save(
            accumulator.text, reasoning=reasoning, model=model, usage=accumulator.usage
        )
    if requests.answered:
        await requests.usage.account_unfinished(accumulator, kept, stopped=stopped)


async def agent_loop(
    *,
    history: History,
    rojo: Rojo,
    ctx: RojoToolContext,
    client: openai.AsyncOpenAI,
    tools: RojoToolRegistry = registry,
    approver: Approver | None = None,
    record_changes: bool = False,
    budgets: list[Left] | None = None,
    role_read: bool = False,
    model: ModelInUse | None = None,
    idle: Idle | None = None,
    writes_wait: Callable[[], Awaitable[None]] | None = None,
) -> AsyncIterator[AgentEvent]:
    """Run the rojo on a history that ends with the user's message.

    Text is yielded as each delta arrives; tool calls run in order after their response
    finished. Raises a TurnError subclass when the turn cannot go on; whatever completed
    before is stored, and calls that never ran are answered as interrupted. Calls of the
    rojo's approval tools wait for `approver` (none: they run); with `record_changes`,
    each change to the files is kept for undo. Each step offers the tools the user's role
    allows at that moment (the runner reads it again: a removed user ends the turn).

    A caller that has just read `ctx.role` (`role_read`) and the budgets (`budgets`), as a
    chat request does before its turn starts, spares the first step reading them again: a
    start then makes two trips to the database fewer before its first request. A call is
    still checked against the role read at the moment it runs.

    `model` is the model the turn asks (rojos.context.model_choice: the conversation's, or a
    regenerate's); None: the rojo's default. Each reply records the model that wrote it.

    `idle` is called before each wait for the provider's next bytes and as each response
    ends: the events yielded so far are all for now (the turn writes them out then).
    `writes_wait` is awaited once each response has streamed, before its step's writes (the
    turn's: starts waiting on this process go first, rojos.turns.admission); a stop while it
    waits keeps the text, as a stop during the stream does.
    """
    model = model or model_default(rojo)
    runner = ToolCallRunner(
        ctx=ctx,
        tools=tools,
        history=history,
        approval_tools=frozenset(rojo.approval_tools or ()),
        approver=approver,
        record_changes=record_changes,
        role_read=role_read,
        instruction_names=tuple(rojo.instruction_files or ()),
    )
    requests = TurnRequests(
        rojo=rojo,
        history=history,
        tools=[],
        client=client,
        ctx=ctx,
        budgets=budgets,
        model=model,
    )
    for _step in range(rojo.max_steps):
        step_ctx = await runner.step_check()
        await tools.prepare(step_ctx)
        requests.offer([tool.definition for tool in tools.available(step_ctx)])
        accumulator = StreamAccumulator(think_opened=requests.think_opened)
        deltas = ToolCallDeltas(accumulator)
        thinking = Thinking(accumulator)
        draft = Draft(history, settings.ROJO_DRAFT_SECONDS)
        try:
            chunks = requests.stream(tick=deltas.quiet_spell, idle=idle)
            async with accumulator.whole_if_broken(), contextlib.aclosing(chunks):
                async for batch in chunks:
                    if type(batch) is not list:  # a summary made to fit the window
                        yield batch
                        continue
                    for chunk in batch:
                        text = accumulator.feed(chunk)
                        if text:
                            # At the reply's end, what streamed as thinking may turn out
                            # to be the answer (no `</think>` came): taken back first.
                            if (thinking.ended is None or accumulator.finish_reason) and (
                                thought := thinking.answered()
                            ):
                                yield thought
                            yield ChatEvent(text=text)
                            if draft.due():  # the text since the last draft, given up
                                draft.save_soon(accumulator.take_text())
                    if (thought := thinking.due()) is not None:  # one per read, not chunk
                        yield thought
                    if accumulator.calls:
                        thinking.answered()
                        for delta in deltas.due():
                            yield delta
            if writes_wait is not None:
                await writes_wait()
            completion = accumulator.result(taken=history.call_ids())
            for delta in deltas.final_ids(completion.tool_calls):
                yield delta
        except BaseException as exc:
            stopped = isinstance(exc, asyncio.CancelledError)
            await whole(_unfinished_kept(draft, accumulator, requests, model.name, stopped))
            raise
        # A Stop as it is stored: kept and counted, then the turn ends.
        notice = _late_notice(accumulator.late_error) or _empty_notice(
            completion, drafted=draft.started()
        )
        completion, message = await whole(
            _stored_counted(draft, completion, rojo, thinking, requests, model.name, notice)
        )
        if notice is not None:  # shown after the reply, as a reopened conversation shows it
            yield notice
        if not completion.tool_calls:
            if completion.finish_reason == "length":
                raise _cut_off(completion)
            return
        try:
            count = len(completion.tool_calls)
            for index, call in enumerate(completion.tool_calls):
                parsed = ToolCall.of(call)  # the one parse of its arguments
                if index == count - 1 and completion.finish_reason == "length":
                    parsed = parsed.cut_off()
                args = parsed.shown_args
                yield ToolCallEvent(
                    id=parsed.id, name=parsed.name, args=args, index=index, of=count
                )
                async for event in runner.run(call, parsed, message.pk, index=index):
                    yield event
        finally:
            await whole(history.close_open_calls())
    raise StepLimitReached(
        f"The rojo used its limit of {rojo.max_steps} "
        f"{ngettext('step', 'steps', rojo.max_steps)} without finishing. "
        "Reply to let it continue."
    )


def _cut_off(completion: Completion) -> ReplyCutOff:
    """The error a reply cut by the model's output limit ends its turn with."""
    if completion.text.strip():
        return ReplyCutOff(
            "The reply reached the model's output limit and was cut off. Reply to let the "
            "rojo continue; an administrator can raise the limit (max_tokens in the rojo's "
            "request options)."
        )
    return ReplyCutOff(
        "The model used its whole output limit thinking and wrote no answer. An "
        "administrator can raise the limit (max_tokens in the rojo's request options), or "
        "ask for less at once."
    )
