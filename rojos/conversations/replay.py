"""A stored conversation as the events it produced, and re-running it against a rojo."""

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

from asgiref.sync import sync_to_async
from django.utils.translation import ngettext

from roject.members.access import aproject_role
from roject.models import Role
from rojos.agent.events import (
    ChatEvent,
    DoneEvent,
    ErrorEvent,
    StartEvent,
    TurnEvent,
    WireEvent,
    numbered,
)
from rojos.agent.history import History
from rojos.agent.stored_events import conversation_turns
from rojos.agent.tool_calls import Approver
from rojos.context.model_choice import model_in_use_blocking
from rojos.errors import TurnError
from rojos.models import Conversation, Message, Rojo
from rojos.tools import RojoToolContext


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

    def add(self, event: TurnEvent) -> None:
        """Append an event; consecutive text joins one CHAT, as a stored message holds it."""
        last = self.events[-1] if self.events else None
        if isinstance(event, ChatEvent) and last is not None and last.type == "CHAT":
            self.events[-1] = WireEvent(last.seq, "CHAT", {"text": last.data["text"] + event.text})
            return
        self.events.append(numbered(len(self.events) + 1, event))


def conversation_replay(conversation: Conversation, **loaded) -> list[ReplayTurn]:
    """Rebuild each turn's wire events from the stored messages and turn records of the
    active branch (`loaded`: what the caller has read of them already, or `branch=N` for
    another branch's path; see stored_events.conversation_turns)."""
    turns = []
    for user, events in conversation_turns(conversation, **loaded):
        numbering = _Numbered()
        for event in events:
            numbering.add(event)
        turns.append(ReplayTurn(user=user, events=numbering.events))
    return turns


class ScratchHistory(History):
    """A history kept in memory only: a re-run must not add to the stored conversation."""

    async def add(self, *, with_row=None, on_saved=None, **fields) -> Message:
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
    # Here, not at the top: they bring the provider's SDK, and the URLconf (so every management
    # command) imports this module; a server imports them at start (rojos/eager.py).
    from rojos.agent.loop import agent_loop
    from rojos.provider.clients import rojo_client

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
    # The conversation's model, where this rojo offers it (another rojo: its default).
    model = await sync_to_async(model_in_use_blocking)(rojo, conversation.model)
    for text in user_messages:
        user = await history.add(role=Message.Role.USER, content=text)
        turn = ReplayTurn(user=user)
        numbering = _Numbered()
        numbering.add(StartEvent(conversation=conversation.pk, message=None))
        try:
            events = agent_loop(
                history=history, rojo=rojo, ctx=ctx, client=client, approver=approver, model=model
            )
            async for event in events:
                numbering.add(event)
        except TurnError as exc:
            numbering.add(ErrorEvent(message=str(exc), code=exc.code))
        numbering.add(DoneEvent())
        turn.events = numbering.events
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
        turns = len(original)
        differences.append(
            f"the re-run stopped after {len(rerun)} of {turns} {ngettext('turn', 'turns', turns)}"
        )
    return differences


def _call_text(call) -> str:
    if call is None:
        return "(no call)"
    name, args = call
    return f"{name}({json.dumps(args, ensure_ascii=False)})"


def conversation_events(conversation: Conversation, **loaded) -> list[dict]:
    """Every stored turn's events in order, as {type, data}: the page renders stored history
    through the handler it uses live, so the two cannot disagree."""
    return [
        {"type": event.type, "data": event.data}
        for turn in conversation_replay(conversation, **loaded)
        for event in turn.events
    ]
