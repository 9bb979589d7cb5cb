"""A conversation's stored history: loading it once per turn and appending to it.

Invariant: every assistant message with tool calls is followed by exactly one tool message per
call id before anything else. Cancellations close open calls right away; a crashed process
is repaired when the next turn loads the history. How the history is sent to a provider
is `provider_request`'s job.
"""

import contextlib
import json
import logging
from collections.abc import Callable
from typing import Any

from asgiref.sync import sync_to_async
from django.db import transaction
from django.db.models import Model, Subquery

from roject.server.prepared_inserts import PreparedInsert, prepared_insert
from rojos.agent.branches import branch_messages, branch_messages_list
from rojos.db import db_retrying
from rojos.models import Conversation, Message
from rojos.provider.wire_text import nul_replaced
from rojos.whole import whole

logger = logging.getLogger(__name__)

INTERRUPTED = {"error": "interrupted"}

_MESSAGE = PreparedInsert(Message)  # its INSERT compiled once: a turn stores several


def tool_content(result: Any) -> str:
    """A tool result as the text of a tool message: strings as they are (but a NUL, which no
    store keeps: rojos.provider.wire_text), the rest as JSON (which escapes it)."""
    if isinstance(result, str):
        return nul_replaced(result)
    return json.dumps(result, ensure_ascii=False)


def tool_result(message: Message) -> Any:
    """A stored tool message's result as the tool returned it."""
    content = message.content or ""
    if (message.extra or {}).get("text_result"):
        return content
    try:
        return json.loads(content)
    except ValueError:
        return content


def unanswered_calls(messages: list[Message]) -> list[dict]:
    """Tool calls of the last assistant message that have no tool message after them."""
    answered: set[str] = set()
    for message in reversed(messages):
        if message.role == Message.Role.TOOL:
            answered.add(message.tool_call_id)
        elif message.role == Message.Role.ASSISTANT and message.tool_calls:
            return [call for call in message.tool_calls if call["id"] not in answered]
        else:
            return []
    return []


_NAME_CHARS = Message._meta.get_field("name").max_length


def _tool_message(
    call: dict, result: Any, *, ok: bool, mcp_server: str | None = None, questions=None
) -> dict:
    """The fields of the tool message answering `call` (of a tool of `mcp_server`, if any,
    with the `questions` it asked the person and their answers)."""
    extra = {"text_result": True} if isinstance(result, str) else {}
    if mcp_server is not None:
        extra["mcp_server"] = mcp_server
    if questions:
        extra["questions"] = questions
    return {
        "role": Message.Role.TOOL,
        "tool_call_id": call["id"],
        # As much of it as the column holds: a model may make up a name of any length (its
        # call keeps it whole; PostgreSQL would refuse the row, and every later one).
        "name": call["function"]["name"][:_NAME_CHARS],
        "content": tool_content(result),
        "is_error": not ok,
        # A text result (a file's content) is stored as is; remember it was not JSON.
        "extra": extra,
    }


async def call_open(conversation: Conversation, call_id: str) -> bool:
    """Whether a call of the last assistant message of the conversation's active branch
    still has no result."""
    path = branch_messages(conversation)
    last = await path.filter(role=Message.Role.ASSISTANT).order_by("-position").afirst()
    if last is None or not any(call.get("id") == call_id for call in last.tool_calls or ()):
        return False
    answered = path.filter(position__gt=last.position, tool_call_id=call_id)
    return not await answered.aexists()


class History:
    """The messages of one conversation for the duration of a turn.

    Loaded with one query; each append is one INSERT, so the queries per agent step do not
    grow with the length of the conversation. Only the turn holder appends, so positions
    can be counted here.
    """

    def __init__(self, conversation: Conversation, messages: list[Message]) -> None:
        self.conversation = conversation
        self.messages = messages
        # The calls that loading answered as interrupted: a crash cut them off.
        self.cut_off: list[dict] = []
        # Text shown but not stored, the database being out of reach: (its draft, the text,
        # how many characters of the draft's stored text it follows).
        self.unsaved: tuple[Message | None, str, int] | None = None
        # What responses used that the database, out of reach, kept from being recorded.
        self.unsaved_usage: list[Model] = []

    @classmethod
    async def load(
        cls, conversation: Conversation, *, user_message: str | None = None
    ) -> "History":
        """Load the history, then store the user's message when given: one database trip."""

        def load() -> History:
            history = cls.load_blocking(conversation)
            if user_message is not None:
                history.append_blocking(role=Message.Role.USER, content=user_message)
            return history

        return await sync_to_async(load)()

    @classmethod
    def load_blocking(cls, conversation: Conversation) -> "History":
        """(Blocking) The messages, in one query; calls a crash left open are answered
        interrupted right away."""
        return cls._loaded(conversation, branch_messages_list(conversation))

    @classmethod
    def load_last_turn_blocking(cls, conversation: Conversation) -> "History":
        """(Blocking) load_blocking's, with the last turn's messages alone (from its user
        message on), in one query: what a conversation whose turns never read the ones
        before needs to answer the calls a crash left open and go on numbering. An MCP
        token's conversation grows by three messages a call, and each call read them all
        (1.8 s a call after 30,000 calls, 1.1 ms now)."""
        # A turn's messages are on the active branch itself (a fork starts with its user
        # message), and one bound on `position` alone lets the index start at the last one.
        on_branch = Message.objects.filter(conversation=conversation, branch=conversation.branch)
        asked = on_branch.filter(role=Message.Role.USER).order_by("-position").values("position")
        last_turn = on_branch.filter(position__gte=Subquery(asked[:1]))
        return cls._loaded(conversation, list(last_turn))

    @classmethod
    def _loaded(cls, conversation: Conversation, messages: list[Message]) -> "History":
        history = cls(conversation, messages)
        history.cut_off = unanswered_calls(history.messages)
        for call in history.cut_off:
            history.append_blocking(**_tool_message(call, INTERRUPTED, ok=False))
        return history

    def _next_position(self) -> int:
        return self.messages[-1].position + 1 if self.messages else 0

    def append_blocking(self, **fields) -> Message:
        """(Blocking) Store one message, from the database thread."""
        message = _MESSAGE.create(
            conversation=self.conversation,
            branch=self.conversation.branch,
            position=self._next_position(),
            **fields,
        )
        self.messages.append(message)
        return message

    async def add(
        self,
        *,
        with_row: Callable[[], Model | None] | None = None,
        on_saved: Callable[[Model], None] | None = None,
        **fields,
    ) -> Message:
        """Store one message. A cancellation mid-insert still records it, then propagates.

        `with_row`, a blocking function, runs first in the database thread and returns a row
        to save in the message's transaction (a tool call's change record), or None: the
        two are stored together or not at all. `on_saved(row)` runs in that transaction
        right after the row is saved (the audit entry of a deletion).
        """
        position = self._next_position()
        return await whole(self._inserted(position, with_row, on_saved, fields))

    async def _inserted(self, position: int, with_row, on_saved, fields: dict) -> Message:
        message = await db_retrying(
            lambda: sync_to_async(self._insert)(position, with_row, on_saved, fields)
        )
        self.messages.append(message)
        return message

    def _insert(self, position: int, with_row, on_saved, fields: dict) -> Message:
        row = with_row() if with_row else None  # outside the transaction: it may hash files
        with transaction.atomic() if row else contextlib.nullcontext():
            if row:
                if row.pk is None:  # a new record (a change's that replaced nothing)
                    prepared_insert(row)
                else:
                    row.save()
                if on_saved is not None:
                    on_saved(row)
            return _MESSAGE.create(
                conversation=self.conversation,
                branch=self.conversation.branch,
                position=position,
                **fields,
            )

    async def add_tool_result(
        self,
        call: dict,
        result: Any,
        *,
        ok: bool,
        with_row: Callable | None = None,
        on_saved: Callable | None = None,
        mcp_server: str | None = None,
        questions: list | None = None,
    ) -> Message:
        fields = _tool_message(call, result, ok=ok, mcp_server=mcp_server, questions=questions)
        return await self.add(with_row=with_row, on_saved=on_saved, **fields)

    async def close_open_calls(self) -> list[dict]:
        """Answer every call that never ran with {"error": "interrupted"}; return those calls."""
        closed = unanswered_calls(self.messages)
        for call in closed:
            await self.add_tool_result(call, INTERRUPTED, ok=False)
        return closed

    def close_open_calls_blocking(self) -> None:
        """(Blocking) close_open_calls, from the database thread."""
        for call in unanswered_calls(self.messages):
            self.append_blocking(**_tool_message(call, INTERRUPTED, ok=False))

    def call_ids(self) -> frozenset[str]:
        """The ids of the tool calls made so far in this conversation."""
        return frozenset(call["id"] for m in self.messages for call in m.tool_calls or ())
