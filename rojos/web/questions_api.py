"""Answers to servers' questions during a turn (MCP elicitation): only the turn's own user
answers, delivered to the turn in whichever process runs it (rojos.turns.control)."""

from typing import Literal

from django.http import HttpRequest
from ninja import Field, Router, Schema, Status

from roject.api_answers import answers
from rojos.turns import control as turn_control
from rojos.web import selectors

router = Router(tags=["chat"])

Value = str | int | float | bool | list[str] | None


class AnswerIn(Schema):
    question: str = Field(description="The id of the question, as its QUESTION event gives it.")
    action: Literal["accept", "decline", "cancel"]
    content: dict[str, Value] | None = Field(
        default=None, description="With accept: the form's values, by field name."
    )


class AnswerOut(Schema):
    delivered: bool


@router.post(
    "/conversations/{conversation_id}/answer",
    response=answers(AnswerOut, 404, 409, 422, 503),
)
async def conversation_answer(request: HttpRequest, conversation_id: int, payload: AnswerIn):
    """Answer a question an MCP server asks during the running reply: accept (with the form's
    values), decline or cancel. Only the person whose reply it is may answer (409 otherwise,
    as for a question answered already or out of time)."""
    conversation, _ = await selectors.aconversation_access(
        user=request.auth, conversation_id=conversation_id
    )
    refused = await turn_control.turn_answer(
        conversation=conversation,
        user=request.auth,
        question_id=payload.question,
        action=payload.action,
        content=payload.content,
    )
    if refused:
        return Status(409, {"detail": refused})
    return {"delivered": True}
