"""A server's question during a turn's call, put to the person whose turn it is.

The question is published on the turn's log (the chat shows its form) and waits, up to
ROJO_ELICITATION_SECONDS, for that person's answer, which comes through the API in whichever
process (rojos.turns.control.turn_answer); no answer in time, or the turn's end, is a cancel.
The question and its answer are kept with the call's stored result (rojos/mcp/questions.py).
"""

import asyncio
from dataclasses import dataclass

from django.conf import settings

from rojos.agent.events import AnsweredEvent, QuestionEvent
from rojos.mcp.questions import Answer, Question

NOT_ASKED = (
    "That question is not waiting for an answer: it was answered already, its time ran out, "
    "or it is not yours to answer."
)
ACTIONS = ("accept", "decline", "cancel")


@dataclass(kw_only=True)
class Waiting:
    """A question waiting in a turn: whose it is to answer, and the answer when it comes."""

    user_id: int
    answer: asyncio.Future


class TurnAsker:
    """Puts the questions of a turn's calls to the turn's user (`questions.Asker`)."""

    def __init__(self, turn, user) -> None:
        self.turn = turn
        self.user_id = user.pk
        self.username = user.get_username()

    async def __call__(self, question: Question, *, call: str | None) -> Answer:
        turn = self.turn
        seconds = settings.ROJO_ELICITATION_SECONDS
        waiting = Waiting(user_id=self.user_id, answer=asyncio.get_running_loop().create_future())
        turn.questions[question.id] = waiting
        turn.publish(
            QuestionEvent(
                id=question.id,
                call=call,
                server=question.server,
                mode=question.mode,
                message=question.message,
                schema=question.schema,
                url=question.url,
                seconds=seconds,
                user=self.username,
            )
        )
        try:
            answer = await _answer(waiting.answer, turn.task, seconds)
        finally:
            turn.questions.pop(question.id, None)
        if turn.finished:  # stopped meanwhile: its log ended with DONE
            return answer
        turn.publish(
            AnsweredEvent(
                id=question.id,
                call=call,
                action=answer.action,
                content=answer.content,
                timed_out=answer.timed_out,
            )
        )
        return answer


async def _answer(answer: asyncio.Future, task: asyncio.Task | None, seconds: float) -> Answer:
    """The person's answer; cancel when none came in `seconds`, or the turn ended first (the
    question may wait in the server's session, not in the turn's own task)."""
    waits = {answer} if task is None else {answer, task}
    await asyncio.wait(waits, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    if answer.done():
        return answer.result()
    answer.cancel()
    return Answer(action="cancel", timed_out=task is None or not task.done())


def question_deliver(
    turn, *, question_id: str, user_id: int, action: str, content: dict | None
) -> str | None:
    """Give a waiting question of `turn` its answer from `user_id`; why not, or None."""
    waiting = turn.questions.get(question_id)
    if waiting is None or waiting.answer.done() or waiting.user_id != user_id:
        return NOT_ASKED
    if action not in ACTIONS:
        return f"the answer is one of {', '.join(ACTIONS)}"
    kept = content if action == "accept" else None
    waiting.answer.set_result(Answer(action=action, content=kept))
    return None
