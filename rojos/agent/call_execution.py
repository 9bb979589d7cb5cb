"""Running a call that may run and storing its result: paged when over the read limit,
charged to the turn's caps, the files it read remembered, the instruction files it enters
named, and, for a call that changes files, its change record kept and audited. Whether it
may run (access, caps, approval) is the runner's (rojos.agent.tool_calls), which extends this.
"""

import asyncio
import contextlib
import functools
from dataclasses import dataclass, field, replace

from roject import storage
from roject.storage import DiskFull
from rojos import metrics
from rojos.agent.access_ended import REVOKED_OUTCOME
from rojos.agent.caps import TurnCaps
from rojos.agent.changing_calls import ChangeRevoked, ChangeStale, ChangeUncopied, change_start
from rojos.agent.history import History
from rojos.agent.kept_results import outcome_paged
from rojos.agent.read_versions import ReadVersions, read_paths
from rojos.changes.file_audit import tool_change_audit
from rojos.changes.ledger import change_published
from rojos.changes.undo import change_finish
from rojos.context.instructions import instructions_joined
from rojos.mcp.questions import call_questions
from rojos.models import FileChange
from rojos.tools import RojoToolContext, RojoToolRegistry, ToolCall, ToolOutcome


@dataclass(kw_only=True)
class CallExecutor:
    """Runs a turn's calls and stores their results; `record_changes` False keeps no undo
    records (a scratch copy has nothing to undo)."""

    ctx: RojoToolContext
    tools: RojoToolRegistry
    history: History
    record_changes: bool = True
    caps: TurnCaps = field(default_factory=TurnCaps)
    # The rojo's instruction file names: a call that first enters a folder with one says so.
    instruction_names: tuple[str, ...] = ()
    # The client's address when a request asked for the calls (an MCP call's): audited.
    address: str | None = None

    def __post_init__(self) -> None:
        conversation_id = self.history.conversation.pk
        if self.ctx.conversation_id is None and conversation_id:
            self.ctx = replace(self.ctx, conversation_id=conversation_id)
        self.reads = ReadVersions(project_id=self.ctx.project_id, root=self.ctx.project_root)

    async def _store(
        self, call: dict, outcome: ToolOutcome, with_row=None, questions: list | None = None
    ) -> None:
        tool = self.tools.get(call["function"]["name"])
        # A name the model made up is counted as "unknown": the labels stay a bounded set.
        metrics.tool_calls.labels(
            tool=call["function"]["name"] if tool is not None else "unknown",
            outcome="ok" if outcome.ok else "error",
        ).inc()
        await self.history.add_tool_result(
            call,
            outcome.result,
            ok=outcome.ok,
            with_row=with_row,
            on_saved=self._audited if with_row else None,
            mcp_server=tool.mcp_server if tool is not None else None,
            questions=questions,
        )

    def _audited(self, change: FileChange) -> None:
        """(Blocking, in the result's transaction) The audit entry of a deleting call."""
        conversation = self.history.conversation
        if conversation.pk:
            tool_change_audit(
                change=change, conversation=conversation, user=self.ctx.user, address=self.address
            )

    async def _execute(
        self, call: dict, parsed: ToolCall, changing, message_id
    ) -> tuple[ToolOutcome, int | None]:
        """Run the call and store its result, with its change record when it changed files.

        The record of a call that may replace something is stored before the call runs and
        finished after it, in the result's transaction: a call cut off by a crash in between
        still leaves a record, which the conversation's next turn finishes
        (undo.cut_off_changes_finish).
        """
        if not (changing and self.record_changes):
            # An unrecorded change (a re-run) is a change all the same: under the lock, which
            # the start-up sweep of crash leftovers respects (roject.storage.leftovers).
            project = self.ctx.project_id
            locked = storage.changes_locked(project) if changing else contextlib.nullcontext()
            with call_questions(parsed.id) as asked:  # an MCP server's, kept with the result
                async with locked:
                    outcome = await self.tools.run(parsed, self.ctx)
            outcome = await self._paged(outcome, name=parsed.name)
            outcome = self.caps.charged(outcome, changed=changing is not None)
            if outcome.ok and (read := read_paths(parsed.name, parsed.args, outcome.result)):
                await asyncio.to_thread(self.reads.remember, read)
            outcome = await self._instructions_joined(parsed, outcome)
            await self._store(call, outcome, questions=asked)
            return outcome, None
        tool, args = changing
        start = functools.partial(
            change_start, ctx=self.ctx, history=self.history, reads=self.reads, tool=tool,
            args=args, call_id=parsed.id, message_id=message_id,
        )  # fmt: skip
        try:
            async with storage.changes_locked(self.ctx.project_id, then=start) as change:
                return await self._execute_recorded(call, parsed, change)
        except ChangeRevoked:  # raised by start, before the call ran
            await self._store(call, REVOKED_OUTCOME)
            return REVOKED_OUTCOME, None
        # Likewise: the file changed since the turn read it, or the snapshot would not fit
        # or could not be taken.
        except (ChangeStale, ChangeUncopied, DiskFull) as refusal:
            refused = ToolOutcome.failure(str(refusal))
            await self._store(call, refused)
            return refused, None

    async def _paged(self, outcome: ToolOutcome, *, name: str) -> ToolOutcome:
        """The outcome, paged when over the read limit (read_result is offered from then). A
        page of a kept result is bounded by the limit already: as JSON it may pass it, and
        kept again, the model would get only its head."""
        tool = self.tools.get(name)
        if tool is not None and tool.reads_kept_results:
            return outcome
        paged = await outcome_paged(
            outcome, project_id=self.ctx.project_id, conversation_id=self.ctx.conversation_id
        )
        if paged is not outcome and not self.ctx.results_kept:
            self.ctx = replace(self.ctx, results_kept=True)
        return paged

    async def _execute_recorded(self, call: dict, parsed: ToolCall, change: FileChange | None):
        """Run a changing call (the change lock held) and store its result with its record."""
        outcome = self.caps.charged(await self.tools.run(parsed, self.ctx), changed=True)
        if self.reads.seen:
            tool = self.tools.get(parsed.name)
            await asyncio.to_thread(self.reads.refresh, tool.changed_paths(parsed.args))
        outcome = await self._instructions_joined(parsed, outcome)
        kept: list[FileChange] = []

        def change_finished() -> FileChange | None:
            finished = change_finish(self.ctx.project_root, change)
            kept.extend([finished] if finished else [])
            return finished

        await self._store(call, outcome, with_row=change_finished if change else None)
        if kept:
            await change_published(kept[0])
        return outcome, kept[0].pk if kept else None

    async def _instructions_joined(self, parsed: ToolCall, outcome: ToolOutcome) -> ToolOutcome:
        """The outcome, naming the instruction files that join with this call (never an MCP
        server's call: its paths are not the project's)."""
        tool = self.tools.get(parsed.name)
        if tool is None or tool.mcp_server:
            return outcome
        return await instructions_joined(
            outcome, args=parsed.args, messages=self.history.messages,
            names=self.instruction_names, project_root=self.ctx.project_root,
        )  # fmt: skip
