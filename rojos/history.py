"""A conversation's stored history: loading it once per turn, appending to it, and sending it.

Invariant: every assistant message with tool calls is followed by exactly one tool message per
call id before anything else. Cancellations close open calls right away; a crashed process
is repaired when the next turn loads the history.
"""

import asyncio
import contextlib
import hashlib
import json
import logging
import time
from collections.abc import Callable
from typing import Any

from asgiref.sync import sync_to_async
from django.db import DatabaseError, transaction
from django.db.models import Model

from .models import Conversation, Message

logger = logging.getLogger(__name__)

INTERRUPTED = {"error": "interrupted"}
# Message-level fields a provider needs back (Gemini's thought signatures); the rest stay stored.
_SENT_BACK_EXTRA = ("extra_content",)
_BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def wire_call_id(stored_id: str) -> str:
    """The id sent to providers for a stored tool-call id: 9 letters and digits, stable.

    Mistral rejects any other shape; hashing maps every stored id the same way each time,
    so an assistant's call and its tool message always agree.
    """
    number = int.from_bytes(hashlib.sha256(stored_id.encode()).digest()[:8], "big")
    chars = []
    for _ in range(9):
        number, digit = divmod(number, 62)
        chars.append(_BASE62[digit])
    return "".join(chars)


def tool_content(result: Any) -> str:
    """A tool result as the text of a tool message: strings as they are, the rest as JSON."""
    return result if isinstance(result, str) else json.dumps(result, ensure_ascii=False)


def tool_result(message: Message) -> Any:
    """A stored tool message's result as the tool returned it."""
    content = message.content or ""
    if (message.extra or {}).get("text_result"):
        return content
    try:
        return json.loads(content)
    except ValueError:
        return content


def _wire_arguments(arguments: str | None) -> str:
    """Arguments as a JSON object string: "{}" for none, and for ones that were not valid.

    The stored call keeps what the model sent (its tool result explains what was wrong);
    providers that parse history (Gemini) would reject the whole request otherwise.
    """
    text = (arguments or "").strip()
    try:
        return text if isinstance(json.loads(text), dict) else "{}"
    except ValueError:
        return "{}"


def _call_to_wire(call: dict, sent_back: tuple[str, ...]) -> dict:
    function = call.get("function") or {}
    wire = {
        "id": wire_call_id(call["id"]),
        "type": "function",
        "function": {
            "name": function.get("name", ""),
            "arguments": _wire_arguments(function.get("arguments")),
        },
    }
    for key in sent_back:
        if key in call:
            wire[key] = call[key]
    return wire


def sent_back_extra(completion_extra: dict, tool_calls: list[dict], model: str) -> dict:
    """A reply's extra fields to store: with the model's name when it must get some back.

    Only the model that signed them reads Gemini's thought signatures; a conversation
    continued with another rojo (Mistral refuses unknown fields) does not get them.
    """
    if any(key in item for item in (completion_extra, *tool_calls) for key in _SENT_BACK_EXTRA):
        return {**completion_extra, "model": model}
    return completion_extra


def message_to_wire(message: Message, model: str | None = None) -> dict:
    """One stored message as a provider expects it back, for `model` (None: any)."""
    if message.role == Message.Role.TOOL:
        return {
            "role": "tool",
            "tool_call_id": wire_call_id(message.tool_call_id),
            "content": message.content or "",
        }
    wire: dict = {"role": message.role}
    extra = message.extra or {}
    signed_by = extra.get("model")
    sent_back = _SENT_BACK_EXTRA if None in (signed_by, model) or signed_by == model else ()
    if message.tool_calls:
        # Content is left out rather than null or "": some local servers fail on null,
        # and some gateways reject an empty text block.
        if message.content:
            wire["content"] = message.content
        wire["tool_calls"] = [_call_to_wire(call, sent_back) for call in message.tool_calls]
    else:
        wire["content"] = message.content or ""
    for key in sent_back:
        if key in extra:
            wire[key] = extra[key]
    return wire


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


def _tool_message(call: dict, result: Any, *, ok: bool) -> dict:
    """The fields of the tool message answering `call`."""
    return {
        "role": Message.Role.TOOL,
        "tool_call_id": call["id"],
        "name": call["function"]["name"],
        "content": tool_content(result),
        "is_error": not ok,
        # A text result (a file's content) is stored as is; remember it was not JSON.
        "extra": {"text_result": True} if isinstance(result, str) else {},
    }


async def call_open(conversation_id: int, call_id: str) -> bool:
    """Whether a call of the conversation's last assistant message still has no result."""
    last = (
        await Message.objects.filter(conversation_id=conversation_id, role=Message.Role.ASSISTANT)
        .order_by("-position")
        .afirst()
    )
    if last is None or not any(call.get("id") == call_id for call in last.tool_calls or ()):
        return False
    answered = Message.objects.filter(
        conversation_id=conversation_id, position__gt=last.position, tool_call_id=call_id
    )
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
        history = cls(conversation, list(Message.objects.filter(conversation=conversation)))
        history.cut_off = unanswered_calls(history.messages)
        for call in history.cut_off:
            history.append_blocking(**_tool_message(call, INTERRUPTED, ok=False))
        return history

    def _next_position(self) -> int:
        return self.messages[-1].position + 1 if self.messages else 0

    def append_blocking(self, **fields) -> Message:
        """(Blocking) Store one message, from the database thread."""
        message = Message.objects.create(
            conversation=self.conversation, position=self._next_position(), **fields
        )
        self.messages.append(message)
        return message

    async def add(self, *, with_row: Callable[[], Model | None] | None = None, **fields) -> Message:
        """Store one message. A cancellation mid-insert still records it, then propagates.

        `with_row`, a blocking function, runs first in the database thread and returns a row
        to save in the message's transaction (a tool call's change record), or None: the
        two are stored together or not at all.
        """
        position = self._next_position()
        insert = asyncio.ensure_future(sync_to_async(self._insert)(position, with_row, fields))
        try:
            message = await asyncio.shield(insert)
        except asyncio.CancelledError:
            self.messages.append(await insert)
            raise
        self.messages.append(message)
        return message

    def _insert(self, position: int, with_row, fields: dict) -> Message:
        row = with_row() if with_row else None  # outside the transaction: it may hash files
        with transaction.atomic() if row else contextlib.nullcontext():
            if row:
                row.save()
            return Message.objects.create(
                conversation=self.conversation, position=position, **fields
            )

    async def add_tool_result(
        self, call: dict, result: Any, *, ok: bool, with_row: Callable | None = None
    ) -> Message:
        return await self.add(with_row=with_row, **_tool_message(call, result, ok=ok))

    async def close_open_calls(self) -> list[dict]:
        """Answer every call that never ran with {"error": "interrupted"}; return those calls."""
        closed = unanswered_calls(self.messages)
        for call in closed:
            await self.add_tool_result(call, INTERRUPTED, ok=False)
        return closed

    def call_ids(self) -> frozenset[str]:
        """The ids of the tool calls made so far in this conversation."""
        return frozenset(call["id"] for m in self.messages for call in m.tool_calls or ())

    def to_wire(self, system_prompt: str = "", model: str | None = None) -> list[dict]:
        """The request's messages: the rojo's system prompt, then the history as stored.

        Roles must alternate for the chat templates of vLLM and llama.cpp (Mistral's, Gemma's),
        and Mistral refuses an assistant message with neither text nor calls: such a message
        (a reply that said nothing) is left out, and user messages in a row (the turn between
        them failed) go as one.
        """
        wire = [{"role": "system", "content": system_prompt}] if system_prompt else []
        for message in self.messages:
            item = message_to_wire(message, model)
            if item["role"] == "assistant" and not (item.get("content") or item.get("tool_calls")):
                continue
            if item["role"] == "user" and wire and wire[-1]["role"] == "user":
                wire[-1] = {**wire[-1], "content": f"{wire[-1]['content']}\n\n{item['content']}"}
                continue
            wire.append(item)
        return wire


class Draft:
    """A step's assistant message while it streams, saved every so often.

    The user sees text as it arrives; saving it now and then (not per chunk: one write per
    interval) means a crashed process loses at most the last interval of it. Drafts are
    written in the background, so the stream never waits on the database.
    """

    def __init__(self, history: History, every: float) -> None:
        self.history = history
        self.every = every
        self.message: Message | None = None
        self.saved_at = time.monotonic()
        self.pending: asyncio.Task | None = None

    def due(self) -> bool:
        """Whether the interval has passed and no save is running: checked on every chunk."""
        if time.monotonic() - self.saved_at < self.every:
            return False
        return self.pending is None or self.pending.done()

    def save_soon(self, text: str) -> None:
        """Start saving the text so far in the background."""
        self.saved_at = time.monotonic()
        self.pending = asyncio.ensure_future(self._draft(text))

    async def _draft(self, text: str) -> None:
        try:
            await self._write(content=text)
        except DatabaseError:
            logger.warning("could not save a draft of the reply", exc_info=True)

    async def save(self, **fields) -> Message:
        """Store the message (after any draft being written), or update the stored draft."""
        if self.pending is not None:
            await asyncio.shield(self.pending)
        return await self._write(**fields)

    async def _write(self, **fields) -> Message:
        if self.message is None:
            self.message = await self.history.add(role=Message.Role.ASSISTANT, **fields)
            return self.message
        for name, value in fields.items():
            setattr(self.message, name, value)
        await self.message.asave(update_fields=list(fields))
        return self.message
