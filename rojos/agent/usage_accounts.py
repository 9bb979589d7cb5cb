"""What each response of one turn used: recorded, charged to the budgets, and learnt from.

A response's usage is the provider's count, else an estimate: the size of the request it
answered (as it was fitted to the window) and of what it wrote, both in characters over the
model's characters-per-token ratio. Each count the provider reports calibrates that ratio,
which sizes the next request (rojos.agent.requests), and the turn stores it once, at its end,
if it moved. Each response is a `UsageRecord` (with its model and at its prices) whose tokens
and cost are spent from the budgets the turn runs under, which are checked (read again, for
the other replies' usage) before each step's request. A response the provider took (its
answer began, a chunk or not) that did not finish (a Stop, a disconnect, an error) is
recorded too, as the provider bills it: its usage if it came, else an estimate. So is one
whose process died as it streamed, by the repair of its turn (`cut_off_account_blocking`):
an estimate of what its drafts kept.
"""

import dataclasses
import logging

from asgiref.sync import sync_to_async

from roject.server.prepared_inserts import PreparedInsert
from rojos import metrics
from rojos.agent.history import History
from rojos.context.budgets import BudgetExceeded, Left, budget_message, budgets_left
from rojos.context.model_choice import ModelInUse, model_in_use_blocking
from rojos.context.usage import UsageCounts, usage_cost, usage_counts
from rojos.context.window import (
    DEFAULT_CHARS_PER_TOKEN,
    calibrated,
    item_chars,
    prompt_budget,
    tokens_of,
    tools_chars,
)
from rojos.db import db_retrying
from rojos.errors import DatabaseUnreachable
from rojos.models import Conversation, Message, Rojo, TurnRecord, UsageRecord
from rojos.provider.accumulator import StreamAccumulator
from rojos.provider.completion import Completion
from rojos.provider.request import request_messages
from rojos.tools import RojoToolContext, registry

_USAGE = PreparedInsert(UsageRecord)  # its INSERT compiled once: every response stores one

logger = logging.getLogger(__name__)

# A calibration that moved less than this is not worth a write.
_RECALIBRATE = 0.05


class TurnUsage:
    """Records the usage of each response of one turn and calibrates the size estimate."""

    def __init__(
        self,
        *,
        rojo: Rojo,
        history: History,
        ctx: RojoToolContext,
        model: ModelInUse,
        budgets: list[Left] | None,
    ) -> None:
        self.rojo = rojo
        self.history = history
        self.ctx = ctx
        self.model = model  # the turn's requests' own: what either learns, both read
        self.budgets = budgets  # None: read before the first request
        # The size of the last request sent: its response's estimate, and the calibration.
        self.sent_chars = 0
        self.stored_ratio = model.chars_per_token

    @property
    def chars_per_token(self) -> float:
        return self.model.chars_per_token or DEFAULT_CHARS_PER_TOKEN

    def calibrate(self, prompt_tokens: int) -> None:
        """Take the last request's size as the provider counted it into the ratio."""
        self.model.chars_per_token = calibrated(
            self.model.chars_per_token, self.sent_chars, prompt_tokens
        )

    async def budgets_check(self, *, later: bool) -> None:
        """Before a step's request: BudgetExceeded if a budget the turn runs under is used up
        (before any model call; or an earlier step, `later`, crossed it: stop here). Read
        again before each later step: what the other replies recorded since counts too, not
        only ours."""
        user, project_id = self.ctx.user, self.ctx.project_id
        if self.budgets is None:
            self.budgets = await sync_to_async(budgets_left)(user=user, project_id=project_id)
        elif later and self.budgets:
            self.budgets = await sync_to_async(budgets_left)(
                user=user, project_id=project_id, budgets=[left.budget for left in self.budgets]
            )
        used_up = next((left for left in self.budgets if left.used_up()), None)
        if used_up is not None:
            raise BudgetExceeded(await sync_to_async(budget_message)(used_up, crossed=later))

    async def account(
        self,
        completion: Completion,
        message: Message | None,
        kind: UsageRecord.Kind = UsageRecord.Kind.REPLY,
    ) -> UsageRecord:
        """Record what the response used (the provider's count, else an estimate). One that
        left no message of its own is counted in its turn: linked to the turn's user
        message."""
        counts = usage_counts(completion.usage) or self._estimated(completion)
        if counts.reported:
            self.calibrate(counts.prompt)
        if not completion.tool_calls:  # the turn's last response
            await self._calibration_save()
        cost = usage_cost(self.model, counts)
        metrics.tokens.labels(direction="in").inc(counts.prompt)
        metrics.tokens.labels(direction="out").inc(counts.completion)
        if cost:
            metrics.cost.inc(float(cost))
        for left in self.budgets or ():
            left.spend(counts.total, cost)
        row = UsageRecord(
            user=self.ctx.user if getattr(self.ctx.user, "pk", None) else None,
            project_id=self.ctx.project_id,
            rojo=self.rojo,
            conversation=self.history.conversation,
            message=message if message is not None and message.pk else self._turn_message(),
            kind=kind,
            **_counted(self.model, counts, cost),
        )
        # Retried as the reply it counts was (rojos.db): an outage that began just after the
        # reply was stored would otherwise end its turn and lose its count. Past the retry
        # time it is recorded with the turn's end (rojos.turns.writeback), as its text is.
        try:
            await db_retrying(lambda: sync_to_async(_USAGE.insert)(row))
        except DatabaseUnreachable:
            self.history.unsaved_usage.append(row)
            raise
        return row

    async def account_unfinished(
        self,
        accumulator: StreamAccumulator,
        kept: Message | None,
        kind: UsageRecord.Kind = UsageRecord.Kind.REPLY,
        *,
        stopped: bool,
    ) -> None:
        """Record what a response that began but was not stored whole used: stopped, cut by
        a disconnect or an error mid-stream, or stopped while its writes waited. The
        provider bills it all the same, and a budget that did not count it could be passed
        by a Stop just before each reply's end: the usage the provider sent before the end,
        else an estimate of the request and of what streamed. `kept`: its stored message,
        holding the whole text its drafts took. A failure here is logged, not raised over
        the end it came with.

        One that failed (`stopped` off) before it answered anything is not counted: a 200
        holding only an error, or a web page in place of the stream, is no bill, and a user
        would pay an estimate for each retry of a provider that keeps refusing."""
        if not stopped and kept is None and accumulator.holds_nothing():
            return
        completion = accumulator.so_far()
        if kept is not None:
            completion = dataclasses.replace(completion, text=kept.content or "")
        await self._account_logged(completion, kept, kind)

    async def account_summary(
        self, completions: list[tuple[Completion, int]], message: Message | None
    ) -> None:
        """Record the responses a summary was read from, each with the size of its request.
        `message`: the stored summary; None when a stop or a failure came first, and then a
        failure here is logged, not raised over the end it came with."""
        for completion, chars in completions:
            self.sent_chars = chars
            if message is None:
                await self._account_logged(completion, None, UsageRecord.Kind.SUMMARY)
            else:
                await self.account(completion, message, UsageRecord.Kind.SUMMARY)

    async def _account_logged(
        self, completion: Completion, message: Message | None, kind: UsageRecord.Kind
    ) -> None:
        try:
            await self.account(completion, message, kind)
        except Exception:
            logger.exception(
                "the usage of an unfinished response of conversation %s",
                self.history.conversation.pk,
            )

    def _estimated(self, completion: Completion) -> UsageCounts:
        return estimated(completion, sent_chars=self.sent_chars, ratio=self.chars_per_token)

    def _turn_message(self) -> Message | None:
        """The user message of the turn, the last in the history."""
        return next(
            (m for m in reversed(self.history.messages) if m.role == Message.Role.USER and m.pk),
            None,
        )

    async def _calibration_save(self) -> None:
        """Store the ratio when it moved since it was loaded: once a turn at most."""
        before, after = self.stored_ratio, self.model.chars_per_token
        if after is None or (before and abs(after - before) / before <= _RECALIBRATE):
            return
        self.stored_ratio = after
        await db_retrying(lambda: self.model.learned_save(chars_per_token=after))


def estimated(completion: Completion, *, sent_chars: int, ratio: float) -> UsageCounts:
    """The request's size as it was fitted to the window, `sent_chars`, and what the
    response wrote: its text, its thinking and its calls' arguments; `ratio` characters a
    token."""
    out = (
        len(completion.text)
        + len(completion.reasoning)
        + sum(len(call["function"]["arguments"]) for call in completion.tool_calls)
    )
    return UsageCounts(
        prompt=tokens_of(sent_chars, ratio), completion=tokens_of(out, ratio), reported=False
    )


def cut_off_account_blocking(
    *, conversation: Conversation, record: TurnRecord, reply: Message, before: list[Message]
) -> UsageRecord | None:
    """(Blocking, in the repair's transaction) Record what a response its dead process cut
    off as it streamed used, as a stopped one's is (`account_unfinished`): the provider
    bills it, and no process is left to count it. Its usage never came, so an estimate: of
    the request it answered, the history `before` it as the rojo sends it (at most what fits
    the window), and of the text its drafts kept. None when its rojo was deleted since."""
    rojo = record.rojo or conversation.rojo
    if rojo is None:
        return None
    model = model_in_use_blocking(rojo, conversation.model)
    ratio = model.chars_per_token or DEFAULT_CHARS_PER_TOKEN
    sent = request_messages(before, system_prompt=rojo.system_prompt, model=model.name)
    sent_chars = sum(map(item_chars, sent)) + tools_chars(registry.definitions(rojo.tools or []))
    sent_chars = min(sent_chars, int(prompt_budget(model) * ratio))
    completion = Completion(
        text=reply.content or "",
        reasoning=reply.reasoning or "",
        tool_calls=[],
        extra={},
        usage=None,
        finish_reason=None,
    )
    counts = estimated(completion, sent_chars=sent_chars, ratio=ratio)
    return UsageRecord.objects.create(
        user=record.user,
        project_id=conversation.project_id,
        rojo=rojo,
        conversation=conversation,
        message=reply,
        kind=UsageRecord.Kind.REPLY,
        **_counted(model, counts, usage_cost(model, counts)),
    )


def _counted(model: ModelInUse, counts: UsageCounts, cost) -> dict:
    """A usage row's figures: the model, the counts, the cost."""
    return {
        "model": model.name,
        "prompt_tokens": counts.prompt,
        "completion_tokens": counts.completion,
        "cached_tokens": counts.cached,
        "reasoning_tokens": counts.reasoning,
        "reported": counts.reported,
        "cost": cost,
    }
