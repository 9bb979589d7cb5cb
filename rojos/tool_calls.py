"""Running one tool call: asking for approval where needed, and recording what it changed."""

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

from roject.storage import StorageError, resolve, resolve_entry

from .events import AgentEvent, ApprovalRequiredEvent, ToolResultEvent
from .history import History
from .models import FileChange
from .tools import RojoTool, RojoToolContext, RojoToolRegistry, is_error, parse_arguments
from .tools.schema import ArgumentError, validate
from .undo import Snapshot, changes_locked, digests, snapshot_take

DENIED = {"error": "denied by the user"}

# Waits for a person's decision on a call id; True to run the call.
Approver = Callable[[str], Awaitable[bool]]


def _exists_any(ctx: RojoToolContext, paths: list[str]) -> bool:
    for relative in paths:
        try:
            entry = resolve_entry(ctx.project_root, relative)
        except StorageError:
            continue
        if entry.exists() or entry.is_symlink():
            return True
    return False


def _preview(tool: RojoTool, args: dict, ctx: RojoToolContext) -> dict:
    try:
        return tool.preview(args, ctx)
    except (StorageError, OSError) as exc:
        return {"error": str(exc)}


@dataclass(kw_only=True)
class ToolCallRunner:
    """Runs the calls of a turn with its rules: who approves, and whether changes are kept.

    `approver` None runs every call without asking (scripts, re-runs on scratch copies);
    `record_changes` False keeps no undo records (a scratch copy has nothing to undo).
    """

    ctx: RojoToolContext
    tools: RojoToolRegistry
    history: History
    approval_tools: frozenset[str] = frozenset()
    approver: Approver | None = None
    record_changes: bool = True

    def _changing_tool(self, name: str, arguments: str) -> tuple[RojoTool, dict] | None:
        """The tool and valid arguments of a call that may change files, else None."""
        tool = self.tools.get(name)
        if tool is None or not tool.writes or tool not in self.tools.available(self.ctx):
            return None
        try:
            args = parse_arguments(arguments)
            validate(args, tool.parameters)
            tool.changed_paths(args)
        except (ArgumentError, KeyError, TypeError):
            return None  # the registry reports the bad arguments
        return tool, args

    async def run(self, call: dict, message_id: int | None) -> AsyncIterator[AgentEvent]:
        call_id, name = call["id"], call["function"]["name"]
        arguments = call["function"]["arguments"]
        changing = self._changing_tool(name, arguments)
        if changing and self.approver is not None and name in self.approval_tools:
            tool, args = changing
            paths = tool.changed_paths(args)
            if await asyncio.to_thread(_exists_any, self.ctx, paths):
                preview = await asyncio.to_thread(_preview, tool, args, self.ctx)
                yield ApprovalRequiredEvent(id=call_id, name=name, args=args, preview=preview)
                if not await self.approver(call_id):
                    await self.history.add_tool_result(call, DENIED, ok=False)
                    yield ToolResultEvent(id=call_id, name=name, result=DENIED, ok=False)
                    return
        # A call that started finishes, even when the turn is stopped meanwhile: its thread
        # would change the files anyway, so its real result and undo record are kept.
        running = asyncio.ensure_future(self._execute(call, changing, message_id))
        try:
            result, change = await asyncio.shield(running)
        except asyncio.CancelledError:
            await running
            raise
        ok = not is_error(result)
        yield ToolResultEvent(id=call_id, name=name, result=result, ok=ok, change=change)

    async def _execute(self, call: dict, changing, message_id) -> tuple[object, int | None]:
        """Run the call and store its result, with its change record when it changed files."""
        name, arguments = call["function"]["name"], call["function"]["arguments"]
        if not (changing and self.record_changes):
            result = await self.tools.execute(name, arguments, self.ctx)
            await self.history.add_tool_result(call, result, ok=not is_error(result))
            return result, None
        async with changes_locked(self.ctx.project_id):
            snapshot = await self._snapshot(*changing)
            result = await self.tools.execute(name, arguments, self.ctx)
            kept: list[FileChange] = []

            def change_row() -> FileChange | None:
                change = self._change(snapshot, name, call["id"], message_id)
                kept.extend([change] if change else [])
                return change

            await self.history.add_tool_result(
                call, result, ok=not is_error(result), with_row=change_row if snapshot else None
            )
            return result, kept[0].pk if kept else None

    def _take_snapshot(self, tool: RojoTool, args: dict) -> Snapshot:
        root = self.ctx.project_root
        paths = tool.changed_paths(args)
        if tool.follows_links:
            paths = [str(resolve(root, p).relative_to(root.resolve())) for p in paths]
        return snapshot_take(self.ctx.project_id, root, paths)

    async def _snapshot(self, tool: RojoTool, args: dict) -> Snapshot | None:
        try:
            return await asyncio.to_thread(self._take_snapshot, tool, args)
        except (StorageError, OSError):
            return None  # the call fails on the same path, so there is nothing to undo

    def _change(self, snapshot: Snapshot, name: str, call_id: str, message_id) -> FileChange | None:
        """The change to keep for undo, unsaved (blocking: it hashes the files).

        A call that changed nothing leaves no record.
        """
        after = digests(self.ctx.project_root, snapshot.paths)
        if after == snapshot.digests:
            snapshot.discard()
            return None
        return FileChange(
            project_id=self.ctx.project_id,
            conversation=self.history.conversation if self.history.conversation.pk else None,
            message_id=message_id,
            tool_call_id=call_id,
            tool=name,
            paths=snapshot.paths,
            before=snapshot.existed,
            after=after,
            created_parents=snapshot.missing_parents,
            key=snapshot.key,
        )
