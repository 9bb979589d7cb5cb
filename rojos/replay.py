"""A stored conversation as the events it produced, and re-running it against a rojo."""

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

from roject.access import aproject_role
from roject.models import Role

from .agent import agent_loop, display_args
from .clients import rojo_client
from .errors import TurnError
from .history import History, tool_result
from .models import Conversation, FileChange, Message, Rojo, TurnRecord
from .tool_calls import Approver
from .tools import RojoToolContext
from .wire import WireEvent, wire_payload


@dataclass
class ReplayTurn:
    """One user message and the events its turn produced."""

    user: Message
    events: list[WireEvent] = field(default_factory=list)

    @property
    def tool_calls(self) -> list[tuple[str, object]]:
        return [(e.data["name"], e.data["args"]) for e in self.events if e.type == "TOOL_CALL"]


class _Numbered:
    def __init__(self) -> None:
        self.events: list[WireEvent] = []

    def add(self, type_, data: dict) -> None:
        """Append an event; consecutive text joins one CHAT, as a stored message holds it."""
        last = self.events[-1] if self.events else None
        if type_ == "CHAT" and last is not None and last.type == "CHAT":
            self.events[-1] = WireEvent(
                last.seq, "CHAT", {"text": last.data["text"] + data["text"]}
            )
            return
        self.events.append(WireEvent(len(self.events) + 1, type_, data))


def tool_message_events(message: Message, call: dict | None, change: int | None = None):
    """The TOOL_CALL and TOOL_RESULT data a stored tool message stands for."""
    arguments = ((call or {}).get("function") or {}).get("arguments", "")
    base = {"id": message.tool_call_id, "name": message.name}
    outcome = {**base, "result": tool_result(message), "ok": not message.is_error}
    if change is not None:
        outcome["change"] = change
    return {**base, "args": display_args(arguments)}, outcome


def conversation_replay(conversation: Conversation) -> list[ReplayTurn]:
    """Rebuild each turn's wire events from the stored messages and turn records."""
    messages = list(Message.objects.filter(conversation=conversation).order_by("position"))
    records = {r.user_message_id: r for r in TurnRecord.objects.filter(conversation=conversation)}
    changes = {c.tool_call_id: c.pk for c in FileChange.objects.filter(conversation=conversation)}
    turns: list[ReplayTurn] = []
    numbered = _Numbered()
    calls: dict[str, dict] = {}

    def close_turn() -> None:
        if not turns:
            return
        record = records.get(turns[-1].user.pk)
        if record is not None and record.error:
            numbered.add("ERROR", {"message": record.error, "code": record.error_code})
        numbered.add("DONE", {})
        turns[-1].events = numbered.events

    for message in messages:
        if message.role == Message.Role.USER:
            close_turn()
            numbered = _Numbered()
            turns.append(ReplayTurn(user=message))
            numbered.add("START", {"conversation": conversation.pk, "message": message.pk})
        elif not turns:
            continue
        elif message.role == Message.Role.ASSISTANT:
            if message.content:
                numbered.add("CHAT", {"text": message.content})
            calls.update({call["id"]: call for call in message.tool_calls or ()})
        elif message.role == Message.Role.TOOL:
            call, outcome = tool_message_events(
                message, calls.get(message.tool_call_id), changes.get(message.tool_call_id)
            )
            numbered.add("TOOL_CALL", call)
            numbered.add("TOOL_RESULT", outcome)
    close_turn()
    return turns


class ScratchHistory(History):
    """A history kept in memory only: a re-run must not add to the stored conversation."""

    async def add(self, *, with_row=None, **fields) -> Message:
        if with_row is not None:
            await asyncio.to_thread(with_row)  # what it returns is not saved either
        position = self.messages[-1].position + 1 if self.messages else 0
        message = Message(conversation=self.conversation, position=position, **fields)
        self.messages.append(message)
        return message


async def conversation_rerun(
    *,
    conversation: Conversation,
    rojo: Rojo,
    root: Path,
    user_messages: list[str],
    approver: Approver | None = None,
) -> AsyncIterator[ReplayTurn]:
    """Send the user messages, in order, to the rojo with tools working on `root`.

    `approver` decides the rojo's Ask-before calls (None: they run, as on a scratch copy).
    """
    role = await aproject_role(user=conversation.user_id, project_id=conversation.project_id)
    ctx = RojoToolContext(
        project_id=conversation.project_id,
        project_root=root,
        user=None,
        role=role or Role.VIEWER,
        enabled=frozenset(rojo.tools or ()),
    )
    history = ScratchHistory(conversation, [])
    client = await rojo_client(rojo)
    for text in user_messages:
        user = await history.add(role=Message.Role.USER, content=text)
        turn = ReplayTurn(user=user)
        numbered = _Numbered()
        numbered.add("START", {"conversation": conversation.pk, "message": None})
        try:
            events = agent_loop(
                history=history, rojo=rojo, ctx=ctx, client=client, approver=approver
            )
            async for event in events:
                numbered.add(*wire_payload(event))
        except TurnError as exc:
            numbered.add("ERROR", {"message": str(exc), "code": exc.code})
        numbered.add("DONE", {})
        turn.events = numbered.events
        yield turn


def tool_call_differences(original: list[ReplayTurn], rerun: list[ReplayTurn]) -> list[str]:
    """Where the re-run's tool calls differ from the original's, turn by turn."""
    differences = []
    for number, (before, after) in enumerate(zip(original, rerun, strict=False), start=1):
        old, new = before.tool_calls, after.tool_calls
        if old == new:
            continue
        for index in range(max(len(old), len(new))):
            was = old[index] if index < len(old) else None
            now = new[index] if index < len(new) else None
            if was != now:
                differences.append(
                    f"turn {number}, call {index + 1}: {_call_text(was)} → {_call_text(now)}"
                )
                break
    if len(rerun) < len(original):
        differences.append(f"the re-run stopped after {len(rerun)} of {len(original)} turns")
    return differences


def _call_text(call) -> str:
    if call is None:
        return "(no call)"
    name, args = call
    return f"{name}({json.dumps(args, ensure_ascii=False)})"
