"""6. Context window: building a compacted request for a long conversation, and what
compaction costs in model calls over a long session.

The build is timed as the loop does it before each request (TurnRequests._prepare on the
loaded history: sizes, stubs, cuts, the request), on 500 stored messages that are far over
the window, with and without a summary already stored; its queries are counted for 50 and
500 messages. The session runs the tests' long conversation (a 16 KB note read per message,
a model that answers from what it is sent) through the agent loop against the tests' fake
provider with a 12,000-token window, and counts the summary requests among all requests.
"""

import asyncio
import statistics
import time
from dataclasses import dataclass

from asgiref.sync import async_to_sync
from django.db import DEFAULT_DB_ALIAS, connections
from django.test.utils import CaptureQueriesContext

from rojos.context.window import tokens_of

from .env import project_new, rojo_new

WINDOW = 12_000
RUNS = 30


@dataclass
class BuildCost:
    messages: int
    summary: bool
    median_ms: float
    max_ms: float
    queries: int
    request_tokens: int


@dataclass
class SessionCost:
    messages: int
    replies: int
    summaries: int
    requests: int
    overflowed: int
    max_request_tokens: int


def _conversation(rojo, user, project, messages: int, *, summary: bool):
    """`messages` stored messages: turns of a question, a call, a 4 KB result, an answer."""
    from rojos.models import Conversation, Message
    from tests.support.long_conversation import answer, note_text, question

    conversation = Conversation.objects.create(project=project, rojo=rojo, user=user)
    rows = []
    for turn in range(messages // 4):
        n = turn % 30 + 1
        call = {
            "id": f"call_{turn}",
            "type": "function",
            "function": {"name": "get_text_content", "arguments": f'{{"path": "n{n}.md"}}'},
        }
        position = turn * 4
        rows += [
            Message(position=position, role="user", content=question(n)),
            Message(position=position + 1, role="assistant", tool_calls=[call]),
            Message(
                position=position + 2,
                role="tool",
                tool_call_id=call["id"],
                name="get_text_content",
                content=note_text(n)[:4000],
                extra={"text_result": True},
            ),
            Message(position=position + 3, role="assistant", content=answer(n)),
        ]
    if summary:
        rows.append(
            Message(
                position=len(rows),
                role="summary",
                content="Notes read and answered: " + "; ".join(map(answer, range(1, 31))),
                extra={"until": len(rows) - 40, "summarised": len(rows) - 40, "from": 0},
            )
        )
    rows.append(Message(position=len(rows), role="user", content=question(1)))
    for row in rows:
        row.conversation = conversation
    Message.objects.bulk_create(rows)
    return conversation


def build_cost(rojo, user, messages: int, *, summary: bool) -> BuildCost:
    """Time the build of the request on a loaded history of `messages` messages.

    With a stored summary, the loop's whole preparation (TurnRequests._prepare); without
    one, the compaction that finds a summary is due (sizes, stubs, cuts, the choice of the
    turns to summarise) and the request built meanwhile, the model call left out.
    """
    from roject.storage import project_root_create
    from rojos.agent.history import History
    from rojos.agent.requests import TurnRequests
    from rojos.provider.request import build_request
    from rojos.tools import RojoToolContext, registry

    project = project_new(f"window {messages} {summary} {time.monotonic_ns()}")
    conversation = _conversation(rojo, user, project, messages, summary=summary)
    tools = [registry.get(name).definition for name in rojo.tools]
    # A root of its own: the preparation reads the project's instruction files (AGENTS.md).
    root = project_root_create(project.pk)
    ctx = RojoToolContext(project_id=project.pk, project_root=root, user=user)

    async def prepare(requests: TurnRequests) -> None:
        if summary:
            async for _event in requests._prepare():
                raise AssertionError("a history with its summary needs no other")
            return
        compaction = requests._compact(requests._budget_chars(), summaries=True)
        requests.request = build_request(
            rojo, requests.history.messages, tools, messages=compaction.messages
        )
        requests.usage.sent_chars = compaction.chars

    with CaptureQueriesContext(connections[DEFAULT_DB_ALIAS]) as captured:
        history = History.load_blocking(conversation)
        requests = TurnRequests(rojo=rojo, history=history, tools=tools, client=None, ctx=ctx)
        async_to_sync(prepare)(requests)
    times = []
    for _ in range(RUNS):
        requests = TurnRequests(rojo=rojo, history=history, tools=tools, client=None, ctx=ctx)
        started = time.perf_counter()
        asyncio.run(prepare(requests))
        times.append((time.perf_counter() - started) * 1000)
    return BuildCost(
        messages=len(history.messages),
        summary=summary,
        median_ms=statistics.median(times),
        max_ms=max(times),
        queries=len(captured),
        request_tokens=tokens_of(requests.usage.sent_chars, requests.usage.chars_per_token),
    )


def session_cost(user, turns: int = 25) -> SessionCost:
    """The long conversation for `turns` turns (4 messages each) through the agent loop."""
    from roject import storage
    from tests.support.fake_provider import FakeProvider, Window, prompt_tokens
    from tests.support.long_conversation import model, notes_write, question

    provider = FakeProvider()
    try:
        provider.window = Window(tokens=WINDOW)
        provider.responder = model
        rojo = rojo_new(
            f"window-session-{time.monotonic_ns()}",
            provider.base_url,
            "fake-model",
            context_window=WINDOW,
        )
        project = project_new(f"window session {time.monotonic_ns()}")
        notes_write(storage.project_root_create(project.pk))
        conversation = None
        for n in range(1, turns + 1):
            conversation = async_to_sync(_turn)(rojo, user, project, conversation, question(n))
        replies = [r for r in provider.requests if r["messages"][0]["content"] != _summary_prompt()]
        return SessionCost(
            messages=turns * 4,
            replies=len(replies),
            summaries=len(provider.requests) - len(replies),
            requests=len(provider.requests),
            overflowed=len(provider.overflowed),
            max_request_tokens=max(map(prompt_tokens, provider.requests)),
        )
    finally:
        provider.close()


async def _turn(rojo, user, project, conversation, message):
    from roject.models import Role
    from roject.storage import project_root
    from rojos.agent.history import History
    from rojos.agent.loop import agent_loop
    from rojos.models import Conversation
    from rojos.provider.clients import rojo_client
    from rojos.tools import RojoToolContext

    if conversation is None:
        conversation = await Conversation.objects.acreate(project=project, rojo=rojo, user=user)
    history = await History.load(conversation, user_message=message)
    ctx = RojoToolContext(
        project_id=project.pk,
        project_root=project_root(project.pk),
        user=user,
        role=Role.OWNER,
        enabled=frozenset(rojo.tools),
    )
    async for _event in agent_loop(
        history=history, rojo=rojo, ctx=ctx, client=await rojo_client(rojo)
    ):
        pass
    return conversation


def _summary_prompt() -> str:
    from rojos.context.summaries import SUMMARY_INSTRUCTION

    return SUMMARY_INSTRUCTION
