"""The requests of one turn: fitted into the model's window, sent, and learnt from.

All of it is for the turn's model (rojos.context.model_choice.ModelInUse: the conversation's,
a regenerate's, or the rojo's default), and what is learned is kept with that model.
Before the first, the model's window is learned from its provider if nobody declared it.
Each request is compacted to fit (rojos.context.compaction), with the oldest turns summarised by
the same model when that is needed (rojos.agent.summary_requests). A provider that refuses the
request as too long teaches the window it states and gets it again, compacted harder, once
per step; then the turn ends with `context_overflow`, the history intact. A provider that
refuses `stream_options` gets the request again without it, and the model remembers that (a
quirk like the others, learned rather than configured). What each response used, the
budgets checked before each step and the calibration of the size estimate are the turn's
`TurnUsage` (rojos.agent.usage_accounts), which holds the size of each request sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from rojos.agent.events import SummaryEvent
from rojos.agent.history import History
from rojos.agent.summary_requests import summary_make
from rojos.agent.usage_accounts import TurnUsage
from rojos.context.budgets import Left
from rojos.context.compaction import Compaction, compact
from rojos.context.discovery import window_learn
from rojos.context.instructions import folders_entered, instruction_files_read, instructions_text
from rojos.context.model_choice import ModelInUse, model_default
from rojos.context.plan import plan_text
from rojos.context.window import item_chars, prompt_budget, tokens_of, tools_chars, window_of
from rojos.models import Rojo
from rojos.models.capabilities import CLOSING_THINK_TAG
from rojos.provider.body import Idle, Tick
from rojos.provider.failures import rojo_fixes
from rojos.provider.images import images_inline, images_taken
from rojos.provider.refusals import ContextOverflow, OptionRefused
from rojos.provider.request import build_request
from rojos.provider.stream import provider_chunks
from rojos.tools import RojoToolContext

# The SDK (openai, over a second to import) only for annotations here; where it is used, it
# is imported then: the URLconf reaches this module, so every management command would pay
# for it. A server imports it at start (rojos/eager.py).
if TYPE_CHECKING:
    import openai

logger = logging.getLogger(__name__)

# Summaries one step may make (a later one covers the earlier summary and more turns).
_SUMMARIES_PER_STEP = 2
# A refusal that states no window: the window is taken to be this share of what was sent,
# and never less than the smallest window a rojo may declare.
_UNDER_REFUSED = 0.85
_SMALLEST_WINDOW = 1024


class TurnRequests:
    """Builds and sends each model request of one turn, and learns from its refusals."""

    def __init__(
        self,
        *,
        rojo: Rojo,
        history: History,
        tools: list[dict],
        client: openai.AsyncOpenAI,
        ctx: RojoToolContext,
        budgets: list[Left] | None = None,
        model: ModelInUse | None = None,
    ) -> None:
        self.rojo = rojo
        # The model asked, with its window, prices and calibration (none: the rojo's default).
        self.model = model or model_default(rojo)
        self.history = history
        self.client = client
        self.fixes = rojo_fixes(rojo)  # what a failure names to set right
        self.ctx = ctx
        self.offer(tools)
        # What each response used: it holds the size of the last request sent and the budgets.
        self.usage = TurnUsage(
            rojo=rojo, history=history, ctx=ctx, model=self.model, budgets=budgets
        )
        self.opened = False
        # The step's provider took the request (its answer began, a chunk or not: a model
        # reading a long prompt sends none for a while): it bills it now, finished or not.
        self.answered = False
        self.request: dict = {}
        self.instructions = ""  # the project's instruction files, read for each request
        # A model whose thinking opens in its prompt streams it, then `</think>`, as content:
        # its steps' replies and its summaries alike.
        self.think_opened = rojo.capabilities(self.model.name).reasoning == CLOSING_THINK_TAG

    def offer(self, tools: list[dict]) -> None:
        """The tools the next requests offer (a step's: the user's role may have changed)."""
        self.tools = tools
        self.tools_chars = tools_chars(tools)

    def _budget_chars(self) -> int:
        return int(prompt_budget(self.model) * self.usage.chars_per_token)

    async def _prepare(self) -> AsyncIterator[SummaryEvent]:
        """Build the step's request to fit the window, summarising old turns when needed."""
        budget = self._budget_chars()
        plan = plan_text(self.history.messages, self.tools)  # when update_plan is offered
        self.instructions = "\n\n".join(p for p in (await self._instructions(), plan) if p)
        for _ in range(_SUMMARIES_PER_STEP):
            compaction = self._compact(budget, summaries=True)
            if not compaction.summarise:
                break
            yield await summary_make(self, compaction.summarise, budget)
        else:
            compaction = self._compact(budget, summaries=False)
        if compaction.chars > budget:
            fixed = self.tools_chars + len(self.rojo.system_prompt) + len(self.instructions)
            if fixed > budget:
                raise ContextOverflow(
                    f"The rojo's system prompt, the project's instruction files and the tool "
                    f"definitions alone take more than its context window of "
                    f"{window_of(self.model):,} tokens allows; an administrator can shorten "
                    "the prompt, turn tools off, or set a larger window in the admin, and "
                    "members can shorten the instruction files."
                )
            raise self.overflow_error()
        self.request = build_request(
            self.rojo,
            self.history.messages,
            self.tools,
            messages=compaction.messages,
            model=self.model,
        )
        self.usage.sent_chars = sum(map(item_chars, self.request["messages"])) + self.tools_chars
        if any(isinstance(m.get("content"), list) for m in self.request["messages"]):
            self.request["messages"] = await asyncio.to_thread(
                images_inline,
                self.request["messages"],
                project_id=self.ctx.project_id,
                taken=images_taken(self.rojo, self.model.name),
            )

    async def _instructions(self) -> str:
        """The project's instruction files as they are now: the root's, and those of the
        folders the conversation entered (rojos.context.instructions)."""
        names = self.rojo.instruction_files or []
        if not names:
            return ""
        files = await asyncio.to_thread(
            instruction_files_read,
            project_root=self.ctx.project_root,
            names=names,
            folders=["", *folders_entered(self.history.messages)],
        )
        return instructions_text(files)

    def _compact(self, budget: int, *, summaries: bool) -> Compaction:
        return compact(
            self.history.messages,
            system_prompt=self.rojo.system_prompt,
            instructions=self.instructions,
            model=self.model.name,
            budget_chars=budget,
            fixed_chars=self.tools_chars,
            summaries=summaries,
        )

    async def stream(
        self, *, tick: Tick | None = None, idle: Idle | None = None
    ) -> AsyncIterator[list[dict] | SummaryEvent]:
        """The chunks of the step's response, a list per network read (an empty one after
        each quiet spell of tick()'s seconds, stream_body.Tick; `idle` before each read that
        waits, provider_chunks'); before them, the SUMMARY of any turns that had to be
        summarised to fit the window."""
        self.answered = False
        later = self.opened  # a step of this turn went before
        if not later:
            self.opened = True
            await window_learn(self.model)
        await self.usage.budgets_check(later=later)
        async for event in self._prepare():
            yield event
        request = self.request
        refused = recovered = False
        while True:
            started = self.answered = False  # a refused attempt is not billed; this one may be
            try:
                chunks = provider_chunks(
                    self.client,
                    request,
                    tick=tick,
                    idle=idle,
                    opened=self._answering,
                    fixes=self.fixes,
                )
                async with contextlib.aclosing(chunks):
                    async for batch in chunks:
                        if batch and not started:  # an empty one: a quiet spell
                            started = True
                        yield batch
                return
            except OptionRefused:
                if started or refused or "stream_options" not in request:
                    raise
                refused = True
                await self.stream_options_refused()
                request.pop("stream_options")
            except ContextOverflow as exc:
                if started or recovered:
                    raise self.overflow_error() from exc
                recovered = True  # once per step: smaller, then give up
                refused_chars = self.usage.sent_chars
                await self.overflowed(exc)
                async for event in self._prepare():
                    yield event
                if self.usage.sent_chars >= refused_chars:  # never the same request again
                    raise self.overflow_error() from exc
                request = self.request

    def _answering(self) -> None:
        self.answered = True

    async def overflowed(self, exc: ContextOverflow) -> None:
        """Learn from a refusal: the prompt's size as the provider counted it (it calibrates
        the estimate), and the window, kept on the rojo: the one the provider states, else
        an upper bound, a little under what was refused."""
        logger.info("rojo %s: over its context window (%s)", self.rojo, exc)
        if exc.prompt:
            self.usage.calibrate(exc.prompt)
        sent = exc.prompt or tokens_of(self.usage.sent_chars, self.usage.chars_per_token)
        window = max(exc.limit or int(sent * _UNDER_REFUSED), _SMALLEST_WINDOW)
        if window < window_of(self.model):
            await self.model.learned_save(refused_window=window)

    def overflow_error(self) -> ContextOverflow:
        return ContextOverflow(
            "The conversation is too long for the model's context window "
            f"({window_of(self.model):,} tokens), even with old tool results left out and "
            "earlier turns summarised. Send your message again (it is kept), in a new "
            "conversation if this happens again; an administrator can set the rojo's real "
            "context window in the admin."
        )

    async def stream_options_refused(self) -> None:
        logger.info("rojo %s: the provider refused stream_options; usage is estimated", self.rojo)
        await self.model.learned_save(stream_usage_refused=True)
