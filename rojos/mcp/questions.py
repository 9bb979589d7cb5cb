"""Questions a server asks during a call (MCP elicitation): whose they are, and the answer.

A question comes on the server's session, in the session's own task, not the caller's: the
session of a server that does not sign in as each member is shared by a project's turns
(`pool`). So a call carries its asker (the person whose turn it is) onto the session while it
runs, and a question goes to the asker of the one call in flight. With several calls in
flight nobody can tell whose the question is, so it is declined; so is one asked while
nobody can answer (an outside agent's call through Rojo's endpoint, a script).

A question's text and form are the server's, untrusted: one the page could not show whole
(a message, a link or a form past the bounds below) is declined, never cut, so that nobody
answers a question they did not see; and a call may ask at most MAX_QUESTIONS, so that a
server cannot fill the chat, its stream and the stored result with questions.
"""

from __future__ import annotations

import contextlib
import json
import logging
import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextvars import ContextVar
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Literal
from urllib.parse import urlsplit

# The MCP SDK's types (over 0.2 s to import) only where they are used: the agent's call
# execution imports this module, and the URLconf it, so every management command would pay for
# them. A server imports them at start (rojos/eager.py).
if TYPE_CHECKING:
    import mcp_types as types

Action = Literal["accept", "decline", "cancel"]

logger = logging.getLogger("rojos.mcp")

MESSAGE_CHARS = 2000  # a question's text: a paragraph, not a document
URL_CHARS = 2048  # a URL question's address
MAX_FIELDS = 20  # a form's fields
MAX_CHOICES = 100  # a field's choices (a list box's options)
SCHEMA_BYTES = 16 * 1024  # the whole form as JSON: titles, descriptions, defaults
MAX_QUESTIONS = 10  # asked during one call; the rest are declined


@dataclass(frozen=True, kw_only=True)
class Question:
    """What a server asked: a form (`schema`, top-level primitive fields) or a URL to visit."""

    id: str
    server: str
    mode: Literal["form", "url"]
    message: str
    schema: dict | None = None
    url: str | None = None


@dataclass(frozen=True, kw_only=True)
class Answer:
    """The person's answer; `timed_out` when none came in time (the server gets cancel)."""

    action: Action
    content: dict | None = None
    timed_out: bool = False


# Asks the person whose turn it is, for the call `call` (its id, None outside a tool call).
Asker = Callable[..., Awaitable[Answer]]
# A call's own asker, bound to it and keeping what was asked (`call_questions`).
BoundAsker = Callable[[Question], Awaitable[Answer]]

DECLINED = Answer(action="decline")

_asker: ContextVar[Asker | None] = ContextVar("mcp_question_asker", default=None)


@dataclass(kw_only=True)
class _CallScope:
    """The questions of one tool call: those answered, and how many were put."""

    id: str | None
    asked: list[dict]
    put: int = 0


_call: ContextVar[_CallScope | None] = ContextVar("mcp_question_call", default=None)


@contextlib.contextmanager
def questions_to(asker: Asker | None) -> Iterator[None]:
    """Servers' questions in this context go to `asker` (a turn's person)."""
    token = _asker.set(asker)
    try:
        yield
    finally:
        _asker.reset(token)


def questions_in_task(asker: Asker) -> None:
    """Servers' questions in the rest of this task go to `asker` (a turn's task, whose
    context is its own)."""
    _asker.set(asker)


@contextlib.contextmanager
def call_questions(call_id: str) -> Iterator[list[dict]]:
    """The questions asked during tool call `call_id`, with their answers, as they come (what
    its stored result keeps: `question_record`)."""
    asked: list[dict] = []
    token = _call.set(_CallScope(id=call_id, asked=asked))
    try:
        yield asked
    finally:
        _call.reset(token)


def asker_current() -> BoundAsker | None:
    """The asker of the call running in this context, or None when nobody can answer."""
    asker = _asker.get()
    if asker is None:
        return None
    scope = _call.get() or _CallScope(id=None, asked=[])

    async def ask(question: Question) -> Answer:
        if scope.put >= MAX_QUESTIONS:  # counted before the answer: questions may overlap
            logger.info(
                "MCP server %s asked more than %d questions in one call: declined",
                question.server,
                MAX_QUESTIONS,
            )
            return DECLINED
        scope.put += 1
        answer = await asker(question, call=scope.id)
        scope.asked.append(question_record(question, answer))
        return answer

    return ask


def call_id_current() -> str | None:
    """The id of the tool call running in this context (`call_questions`), or None."""
    scope = _call.get()
    return scope.id if scope else None


def call_asked() -> list[dict]:
    """The questions asked so far during the tool call running in this context."""
    scope = _call.get()
    return list(scope.asked) if scope else []


def question_record(question: Question, answer: Answer) -> dict:
    """A question and its answer as the call's stored result keeps them."""
    return {**asdict(question), "answer": asdict(answer)}


def question_from(params: types.ElicitRequestParams, server: str) -> Question | None:
    """The question the server asks, or None for one that cannot be shown: a URL that is
    not http(s) (a `javascript:` link is never offered), or a question past the bounds."""
    import mcp_types as types

    if len(params.message) > MESSAGE_CHARS:
        return _unshown(server, f"its message is over {MESSAGE_CHARS} characters")
    if isinstance(params, types.ElicitRequestURLParams):
        if urlsplit(params.url).scheme not in ("http", "https"):
            return None
        if len(params.url) > URL_CHARS:
            return _unshown(server, f"its URL is over {URL_CHARS} characters")
        return Question(
            id=uuid.uuid4().hex, server=server, mode="url", message=params.message, url=params.url
        )
    schema = params.requested_schema
    if not isinstance(schema, dict):
        schema = schema.model_dump(by_alias=True, exclude_none=True)
    if (why := _form_too_big(schema)) is not None:
        return _unshown(server, why)
    return Question(
        id=uuid.uuid4().hex, server=server, mode="form", message=params.message, schema=schema
    )


def _form_too_big(schema: dict) -> str | None:
    """Why the form cannot be shown whole, or None."""
    try:
        size = len(json.dumps(schema, ensure_ascii=False).encode())
    except (TypeError, ValueError):
        return "its form is not JSON"
    if size > SCHEMA_BYTES:
        return f"its form is over {SCHEMA_BYTES} bytes"
    fields = schema.get("properties")
    if not isinstance(fields, dict):
        return None
    if len(fields) > MAX_FIELDS:
        return f"its form has over {MAX_FIELDS} fields"
    for field in fields.values():
        for holder in (field, field.get("items") if isinstance(field, dict) else None):
            if not isinstance(holder, dict):
                continue
            for key in ("enum", "enumNames", "oneOf", "anyOf"):
                if isinstance(holder.get(key), list) and len(holder[key]) > MAX_CHOICES:
                    return f"a field of its form has over {MAX_CHOICES} choices"
    return None


def _unshown(server: str, why: str) -> None:
    logger.info("MCP server %s asked a question too big to show (%s): declined", server, why)


def defaults_applied(schema: dict | None, content: dict | None) -> dict:
    """The form's values as the server gets them. A schema's default is where the form starts
    (SEP-1034): a field the answer left out, having seen no form (a script, the conformance
    client), takes it; one the person emptied in the chat's form comes as null and is left
    out, neither the default they removed nor a null its type does not allow."""
    given = content or {}
    filled = {name: value for name, value in given.items() if value is not None}
    for name, field in ((schema or {}).get("properties") or {}).items():
        if name not in given and isinstance(field, dict) and "default" in field:
            filled[name] = field["default"]
    return filled


def elicit_result(question: Question, answer: Answer) -> types.ElicitResult:
    """The answer as the server reads it: content only for an accepted form."""
    import mcp_types as types

    if answer.action == "accept" and question.mode == "form":
        content = defaults_applied(question.schema, answer.content)
        return types.ElicitResult(action="accept", content=content)
    return types.ElicitResult(action=answer.action)


def answer_outcome(asked: list[dict]) -> str | None:
    """What the tool result says when the person did not accept a question (None if every
    question was accepted): the model should not ask the same again at once."""
    for record in asked:
        answer = record["answer"]
        if answer["timed_out"]:
            return "the question the server asked got no answer in time; the server was told cancel"
        if answer["action"] == "decline":
            return "the person declined the question the server asked"
        if answer["action"] == "cancel":
            return "the person cancelled the question the server asked"
    return None
