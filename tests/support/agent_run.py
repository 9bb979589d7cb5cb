"""Running the real agent loop in-process against the fake provider, for the loop's tests."""

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path

from asgiref.sync import sync_to_async

from roject import storage
from roject.models import Role
from rojos.agent.events import (
    AgentEvent,
    ApprovalRequiredEvent,
    ChatEvent,
    NoticeEvent,
    ReasoningEvent,
    ToolCallDeltaEvent,
    ToolCallEvent,
    ToolResultEvent,
)
from rojos.agent.history import History
from rojos.agent.loop import agent_loop
from rojos.errors import TurnError
from rojos.models import Conversation, Message, Rojo
from rojos.provider.clients import rojo_client
from rojos.tools import RojoToolContext
from tests.support.helpers import assert_history_valid, make_rojo, stored_history

API_KEY = "sk-test-secret-key-123"  # what make_rojo stores
# The loop's tests name the kinds of what it yields in the words they were written with.
KINDS = {
    ChatEvent: "text",
    ReasoningEvent: "reasoning",
    ToolCallDeltaEvent: "tool_call_delta",
    ToolCallEvent: "tool_call",
    ToolResultEvent: "tool_result",
    ApprovalRequiredEvent: "approval_required",
    NoticeEvent: "notice",
}


@dataclass
class TurnRun:
    """What one turn yielded, and the TurnError that ended it, if any."""

    conversation: Conversation
    root: Path
    events: list[AgentEvent]
    error: TurnError | None
    times: list[float]  # when each event came, in seconds since the turn started
    started: float = 0.0  # when the turn started (time.monotonic())

    @property
    def kinds(self) -> list[str]:
        return [KINDS[type(event)] for event in self.events]

    @property
    def text(self) -> str:
        return "".join(e.text for e in self.events if isinstance(e, ChatEvent))

    @property
    def calls(self) -> list[ToolCallEvent]:
        return [e for e in self.events if isinstance(e, ToolCallEvent)]

    @property
    def results(self) -> list[ToolResultEvent]:
        return [e for e in self.events if isinstance(e, ToolResultEvent)]


async def rojo_for(fake_provider, **fields) -> Rojo:
    """A stored rojo pointing at the fake provider (or at `base_url` when given)."""
    base_url = fields.pop("base_url", fake_provider.base_url)
    return await sync_to_async(make_rojo)(base_url, **fields)


async def run_turn(
    *,
    project,
    rojo: Rojo,
    user,
    role: Role = Role.EDITOR,
    message: str = "Please help.",
    conversation: Conversation | None = None,
    model=None,
) -> TurnRun:
    """Store the user's message and drive agent_loop to its end, as turns.py does (asking
    `model`, a rojos.context.model_choice.ModelInUse; None: the rojo's default)."""
    if conversation is None:
        conversation = await Conversation.objects.acreate(project=project, rojo=rojo, user=user)
    root = await asyncio.to_thread(storage.project_root_create, project.pk)
    history = await History.load(conversation, user_message=message)
    ctx = RojoToolContext(
        project_id=project.pk,
        project_root=root,
        user=user,
        role=role,
        enabled=frozenset(rojo.tools),
    )
    events: list[AgentEvent] = []
    times: list[float] = []
    error = None
    client = await rojo_client(rojo)
    started = time.monotonic()
    try:
        events_of = agent_loop(history=history, rojo=rojo, ctx=ctx, client=client, model=model)
        async for event in events_of:
            events.append(event)
            times.append(time.monotonic() - started)
    except TurnError as exc:
        error = exc
    return TurnRun(
        conversation=conversation, root=root, events=events, error=error, times=times,
        started=started,
    )  # fmt: skip


async def valid_history(conversation: Conversation) -> list[Message]:
    """The stored messages of a conversation, checked against the history invariant."""
    messages = await sync_to_async(stored_history)(conversation.pk)
    assert_history_valid(messages)
    return messages
