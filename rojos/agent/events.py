"""The events of a turn: one vocabulary from the agent loop to the browser.

Each event is a frozen dataclass whose `type` is its wire name; `TurnEvent` is the union of
them all, and `AgentEvent` the part the agent loop yields (the turn runner adds START, ERROR
and DONE around it). At the end of this module, the events on the wire: `numbered` gives an
event its seq and its data (`WireEvent`), which the turn's log keeps and `rojos.web.wire`
encodes; `rojos.agent.stored_events` rebuilds them from stored messages, so a replayed or
reopened turn shows what the live one did.
"""

from dataclasses import asdict, dataclass
from typing import Any, Literal


@dataclass(frozen=True, slots=True, kw_only=True)
class StartEvent:
    """A turn began: the conversation it is in and the user message it answers."""

    conversation: int
    message: int | None  # None in a re-run, whose messages are not stored
    type: Literal["START"] = "START"


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatEvent:
    """Text of the reply, as it streams."""

    text: str
    type: Literal["CHAT"] = "CHAT"


@dataclass(frozen=True, slots=True, kw_only=True)
class ReasoningEvent:
    """The model's thinking before it answers or calls, shown folded: more of it as it
    streams, or a stored reply's `whole`, with how long it thought when that is known.

    `retracted` (with no text): what streamed as this response's thinking was not thinking
    after all, but its answer, which the CHAT after it carries (a model whose thinking opens
    in its prompt ended its reply without `</think>`: rojos.provider.think_tags)."""

    text: str
    whole: bool = False
    seconds: float | None = None
    retracted: bool = False
    type: Literal["REASONING"] = "REASONING"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallEvent:
    id: str
    name: str
    args: Any  # the parsed JSON object, or the raw string when it was not valid JSON
    index: int = 0  # its place among the calls of its response
    of: int = 1  # how many calls its response made: more than one are shown as a group
    type: Literal["TOOL_CALL"] = "TOOL_CALL"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallDeltaEvent:
    """A tool call still being written by the model: what is known of it so far.

    Sent while its arguments stream (at most one per call every ROJO_TOOL_DELTA_SECONDS),
    never stored: the call's TOOL_CALL, with the same `id`, supersedes them. `index` is its
    place among the calls of its response; `id` may change once (a provider's missing or
    repeated id is replaced when the response ends, and one more delta says so).
    """

    index: int
    id: str
    name: str
    chars: int  # how much of the arguments' text has arrived
    path: str | None = None  # the file it works on, once that part has arrived
    text: str = ""  # more of the text a write or an edit puts in (appended to the last)
    # A forming update_plan call: its steps so far, each with what has arrived of it.
    steps: list[dict] | None = None
    type: Literal["TOOL_CALL_DELTA"] = "TOOL_CALL_DELTA"


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalRequiredEvent:
    id: str
    name: str
    args: Any
    preview: dict  # what the call would change: a diff, a move, the paths it would delete
    routed: bool = False  # it waits for an owner of the project, not the turn's user
    type: Literal["APPROVAL_REQUIRED"] = "APPROVAL_REQUIRED"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResultEvent:
    id: str
    name: str
    result: Any
    ok: bool
    change: int | None = None  # the undo record of what the call changed, if anything
    # The MCP server whose tool ran: what it changed is not in the undo ledger.
    mcp_server: str | None = None
    type: Literal["TOOL_RESULT"] = "TOOL_RESULT"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolProgressEvent:
    """How far running call `id` has come, as its MCP server reports it (`total` and
    `message` if it gave them; the message is the server's words, cut to a line).

    Throttled (rojos/mcp/progress.py) and never stored: the turn's log keeps them for a
    re-attaching page, which shows the last; the call's TOOL_RESULT supersedes them."""

    id: str
    progress: float
    total: float | None = None
    message: str | None = None
    type: Literal["TOOL_PROGRESS"] = "TOOL_PROGRESS"


@dataclass(frozen=True, slots=True, kw_only=True)
class QuestionEvent:
    """An MCP server asks the person whose turn it is, during call `call` (elicitation): a
    form (`schema`) or a URL to visit; `seconds` to answer (rojos/mcp/questions.py)."""

    id: str
    call: str | None
    server: str
    mode: str
    message: str
    schema: dict | None = None
    url: str | None = None
    seconds: float | None = None  # None in a stored turn: answered long ago
    user: str | None = None  # whose turn it is: only they answer (their username)
    type: Literal["QUESTION"] = "QUESTION"


@dataclass(frozen=True, slots=True, kw_only=True)
class AnsweredEvent:
    """The question's answer: accept (with the form's `content`), decline or cancel."""

    id: str
    call: str | None
    action: str
    content: dict | None = None
    timed_out: bool = False
    type: Literal["ANSWERED"] = "ANSWERED"


@dataclass(frozen=True, slots=True, kw_only=True)
class SummaryEvent:
    """The oldest turns were summarised to fit the model's window (the stored ones stay)."""

    text: str
    messages: int  # how many stored messages the summary stands for in requests
    type: Literal["SUMMARY"] = "SUMMARY"


@dataclass(frozen=True, slots=True, kw_only=True)
class NoticeEvent:
    """What the user should know of a reply, stored with it (so a reopened conversation
    shows it too): `code` says what. `late_error`: the provider's stream failed after the
    response's finish reason (an error object, a reset, a silence); the reply is whole and
    kept, its calls run. `empty_reply`: the response finished with no text, thinking or
    call."""

    message: str
    code: Literal["late_error", "empty_reply"]
    type: Literal["NOTICE"] = "NOTICE"


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorEvent:
    """The turn ended early; `code` says why (provider, stopped, timeout, internal, ...)."""

    message: str
    code: str
    type: Literal["ERROR"] = "ERROR"


@dataclass(frozen=True, slots=True, kw_only=True)
class DoneEvent:
    """The last event of every turn, however it ended."""

    type: Literal["DONE"] = "DONE"


AgentEvent = (
    ChatEvent
    | ReasoningEvent
    | ToolCallDeltaEvent
    | ToolCallEvent
    | ApprovalRequiredEvent
    | ToolProgressEvent
    | ToolResultEvent
    | QuestionEvent
    | AnsweredEvent
    | SummaryEvent
    | NoticeEvent
)
TurnEvent = StartEvent | AgentEvent | ErrorEvent | DoneEvent


# The events on the wire: what the turn's log keeps, numbered, and every encoder sends.
WireType = Literal[
    "START",
    "CHAT",
    "REASONING",
    "TOOL_CALL_DELTA",
    "TOOL_CALL",
    "APPROVAL_REQUIRED",
    "TOOL_PROGRESS",
    "TOOL_RESULT",
    "QUESTION",
    "ANSWERED",
    "SUMMARY",
    "NOTICE",
    "ERROR",
    "DONE",
]


@dataclass(frozen=True, slots=True)
class WireEvent:
    """A numbered event of a turn, as the browser sees it: its wire name and its data."""

    seq: int
    type: WireType
    data: dict


def event_data(event: TurnEvent) -> dict:
    """An event's data on the wire: its fields but the tag (a result's change only if any)."""
    match event:
        case ChatEvent(text=text):
            return {"text": text}
        case ReasoningEvent(text=text, whole=whole, seconds=seconds, retracted=retracted):
            if retracted:
                return {"text": "", "retracted": True}
            if not whole:
                return {"text": text}
            return {"text": text, "whole": True, "seconds": seconds}
        case ToolCallDeltaEvent(index=index, id=id_, name=name, chars=chars, path=path, text=text):
            data = {"index": index, "id": id_, "name": name, "chars": chars}
            if path is not None:
                data["path"] = path
            if event.steps is not None:
                data["steps"] = event.steps
            return {**data, "text": text} if text else data
        case ToolCallEvent(id=id_, name=name, args=args, index=index, of=of):
            data = {"id": id_, "name": name, "args": args}
            return data if of == 1 else {**data, "index": index, "of": of}
        case ApprovalRequiredEvent(id=id_, name=name, args=args, preview=preview, routed=routed):
            data = {"id": id_, "name": name, "args": args, "preview": preview}
            return {**data, "routed": True} if routed else data
        case ToolResultEvent(
            id=id_, name=name, result=result, ok=ok, change=change, mcp_server=server
        ):
            data = {"id": id_, "name": name, "result": result, "ok": ok}
            if change is not None:
                data["change"] = change
            if server is not None:  # not in the undo ledger: the page says so
                data["mcp"] = {"server": server, "undoable": False}
            return data
        case ToolProgressEvent() | QuestionEvent() | AnsweredEvent():
            return {k: v for k, v in asdict(event).items() if k != "type" and v is not None}
        case SummaryEvent(text=text, messages=messages):
            return {"text": text, "messages": messages}
        case NoticeEvent(message=message, code=code):
            return {"message": message, "code": code}
        case StartEvent(conversation=conversation, message=message):
            return {"conversation": conversation, "message": message}
        case ErrorEvent(message=message, code=code):
            return {"message": message, "code": code}
        case DoneEvent():
            return {}
    raise TypeError(f"not a turn event: {event!r}")


def numbered(seq: int, event: TurnEvent) -> WireEvent:
    """The event as the wire carries it, numbered `seq` (0: unnumbered)."""
    return WireEvent(seq, event.type, event_data(event))
