"""Stored messages as the events their turns produced: the one place that rebuilds them.

Replay and export of a conversation, a reopened chat, and a turn that was stopped or cut off
(whose last calls were answered in the database, not live) all show the events built here,
so a stored turn reads as the live one did.
"""

from collections.abc import Iterable, Iterator

from rojos.agent.branches import branch_messages
from rojos.agent.events import (
    AnsweredEvent,
    ChatEvent,
    DoneEvent,
    ErrorEvent,
    NoticeEvent,
    QuestionEvent,
    ReasoningEvent,
    StartEvent,
    SummaryEvent,
    ToolCallEvent,
    ToolResultEvent,
    TurnEvent,
)
from rojos.agent.history import tool_result
from rojos.models import Conversation, FileChange, Message, TurnRecord
from rojos.tools import display_args


def tool_message_events(
    message: Message, call: dict | None, change: int | None = None, place: tuple[int, int] = (0, 1)
) -> tuple[ToolCallEvent, ToolResultEvent]:
    """The call and result a stored tool message stands for (`call`: its assistant's call,
    `place`: its index among that message's calls, and how many it made)."""
    arguments = ((call or {}).get("function") or {}).get("arguments", "")
    index, of = place
    return (
        ToolCallEvent(
            id=message.tool_call_id,
            name=message.name,
            args=display_args(arguments),
            index=index,
            of=of,
        ),
        ToolResultEvent(
            id=message.tool_call_id,
            name=message.name,
            result=tool_result(message),
            ok=not message.is_error,
            change=change,
            mcp_server=(message.extra or {}).get("mcp_server"),
        ),
    )


def questions_events(message: Message) -> Iterator[QuestionEvent | AnsweredEvent]:
    """The questions a server asked during the stored call, each with its answer."""
    for asked in (message.extra or {}).get("questions", ()):
        answer = asked.get("answer") or {}
        fields = {k: asked.get(k) for k in ("id", "server", "mode", "message", "schema", "url")}
        yield QuestionEvent(call=message.tool_call_id, **fields)
        yield AnsweredEvent(
            id=asked.get("id"),
            call=message.tool_call_id,
            action=answer.get("action", "cancel"),
            content=answer.get("content"),
            timed_out=bool(answer.get("timed_out")),
        )


# The notices the loop stores with a reply, by the extra key that holds its words.
NOTICES = ("late_error", "empty_reply")


def message_events(
    messages: Iterable[Message], *, changes: dict[str, int] | None = None
) -> Iterator[tuple[Message, TurnEvent]]:
    """The events of the replies among `messages`, each with the message it comes from.

    An assistant message gives its reasoning (whole, with its seconds), its text and the
    notice stored with it (`extra["late_error"]`, `extra["empty_reply"]`, the loop's); each
    tool message gives its call and its result (with the id of its change record, from
    `changes` by call id); a summary its SUMMARY.
    User messages give nothing: they frame turns, which `conversation_turns` does.
    """
    calls: dict[str, dict] = {}
    places: dict[str, tuple[int, int]] = {}
    for message in messages:
        if message.role == Message.Role.ASSISTANT:
            if message.reasoning:
                seconds = (message.extra or {}).get("reasoning_seconds")
                yield message, ReasoningEvent(text=message.reasoning, whole=True, seconds=seconds)
            if message.content:
                yield message, ChatEvent(text=message.content)
            for code in NOTICES:
                if told := (message.extra or {}).get(code):
                    yield message, NoticeEvent(message=told, code=code)
            made = message.tool_calls or ()
            calls.update({call["id"]: call for call in made})
            places.update({call["id"]: (n, len(made)) for n, call in enumerate(made)})
        elif message.role == Message.Role.TOOL:
            change = (changes or {}).get(message.tool_call_id)
            call = calls.get(message.tool_call_id)
            place = places.get(message.tool_call_id, (0, 1))
            called, result = tool_message_events(message, call, change, place)
            yield message, called
            for event in questions_events(message):
                yield message, event
            yield message, result
        elif message.role == Message.Role.SUMMARY:
            covered = (message.extra or {}).get("summarised", 0)
            yield message, SummaryEvent(text=message.content or "", messages=covered)


def conversation_turns(
    conversation: Conversation,
    *,
    messages: list[Message] | None = None,
    records: list[TurnRecord] | None = None,
    changes: list[FileChange] | None = None,
    branch: int | None = None,
) -> list[tuple[Message, list[TurnEvent]]]:
    """(Blocking) Each user message of the conversation with the events of its turn: START,
    the reply's events, the turn's ERROR if it ended with one, and DONE.

    Three queries, fewer for what the caller has loaded already (in position order): the
    active branch's messages, or those of `branch`'s path.
    """
    if messages is None:
        messages = list(branch_messages(conversation, branch).order_by("position"))
    if records is None:
        records = list(TurnRecord.objects.filter(conversation=conversation))
    if changes is None:
        changes = list(FileChange.objects.filter(conversation=conversation))
    record_of = {r.user_message_id: r for r in records}
    change_of = {c.tool_call_id: c.pk for c in changes}
    turns: list[tuple[Message, list[TurnEvent]]] = []
    replies: list[Message] = []

    def close_turn() -> None:
        if not turns:
            return
        user, events = turns[-1]
        events.extend(event for _, event in message_events(replies, changes=change_of))
        record = record_of.get(user.pk)
        if record is not None and record.error:
            events.append(ErrorEvent(message=record.error, code=record.error_code))
        events.append(DoneEvent())

    for message in messages:
        if message.role == Message.Role.USER:
            close_turn()
            replies = []
            turns.append((message, [StartEvent(conversation=conversation.pk, message=message.pk)]))
        elif turns:
            replies.append(message)
    close_turn()
    return turns
