"""5. Database: queries per agent step, counted, for a short and a long conversation.

The verification story runs through the project's agent loop after 2 and after 50 stored
messages. The loop's ORM calls are routed to this thread (async_to_sync from the main
thread), so CaptureQueriesContext sees every one of them; a step starts where the loop asks
the provider (provider_chunks is wrapped to mark the place, nothing else changes).
"""

import itertools
import time
from dataclasses import dataclass, field
from unittest import mock

from asgiref.sync import async_to_sync
from django.db import DEFAULT_DB_ALIAS, connections
from django.test.utils import CaptureQueriesContext

from .env import project_new
from .loop_overhead import loop_turn


@dataclass
class QueryCount:
    prior: int
    load: int = 0  # loading the history and storing the user's message
    steps: list[int] = field(default_factory=list)
    kinds: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.steps)


def _conversation_with(prior: int, rojo, user, project):
    """A conversation holding `prior` messages: user and assistant, alternating."""
    from rojos.models import Conversation, Message

    conversation = Conversation.objects.create(project=project, rojo=rojo, user=user)
    Message.objects.bulk_create(
        Message(
            conversation=conversation,
            position=n,
            role=Message.Role.USER if n % 2 == 0 else Message.Role.ASSISTANT,
            content=f"earlier message {n}",
        )
        for n in range(prior)
    )
    return conversation


def queries_per_step(rojo, user, *, prior: int) -> QueryCount:
    """Count the queries of loading the history and of each step of the story."""
    from rojos.agent import requests as turn_requests

    project = project_new(f"queries {prior} {time.monotonic_ns()}")
    conversation = _conversation_with(prior, rojo, user, project)
    marks: list[int] = []
    original = turn_requests.provider_chunks

    # This thread's connection itself: the `connection` proxy would look up the connection
    # of whichever thread reads the count, and the marks are taken on the event loop's.
    with CaptureQueriesContext(connections[DEFAULT_DB_ALIAS]) as captured:

        def mark(name: str) -> None:
            marks.append(len(captured))

        def marked_chunks(client, request, **kwargs):
            mark("step")
            return original(client, request, **kwargs)

        with mock.patch.object(turn_requests, "provider_chunks", marked_chunks):
            async_to_sync(loop_turn)(
                rojo, user, project, conversation=conversation, mark=mark, lane=False
            )
    start, loop, _first_request, *later_requests = marks
    bounds = [loop, *later_requests, len(captured)]
    count = QueryCount(prior=prior, load=loop - start)
    count.steps = [end - begin for begin, end in itertools.pairwise(bounds)]
    for query in captured.captured_queries[loop:]:
        kind = query["sql"].split(None, 1)[0].upper()
        count.kinds[kind] = count.kinds.get(kind, 0) + 1
    return count
