"""Thinking across two server processes (PostgreSQL + Redis): a client that re-attaches
through the process not running the turn gets the thinking so far and the rest of it,
relayed from the turn's log, before the call."""

import os
import threading

import pytest
from django.db import connection

from tests.support.fake_provider import (
    Gate,
    reasoning_chunks,
    stream,
    text_chunks,
    tool_call_chunks,
)
from tests.support.helpers import make_rojo
from tests.support.live_server import parse_sse, read_until

pytestmark = pytest.mark.django_db(transaction=True)

PIECES = [f"thought {n}; " for n in range(40)]


@pytest.fixture
def other_process(server_process, settings):
    if not os.environ.get("REDIS_URL") or connection.vendor != "postgresql":
        pytest.skip("scale-out runs with REDIS_URL and a PostgreSQL DATABASE_URL set")
    settings.ROJO_PROVIDER_RETRIES = 0
    return server_process(ROJO_PROVIDER_RETRIES="0")


def test_reattaching_through_the_other_process_gets_the_whole_thinking(
    other_process, client_for, users, project, fake_provider
):
    rojo = make_rojo(fake_provider.base_url)
    opened = threading.Event()
    groups = reasoning_chunks(PIECES, "reasoning_content")
    fake_provider.add(
        stream(
            *groups[:10],
            Gate(opened),
            *groups[10:],
            tool_call_chunks([("list_files", {"path": ""})]),
        ),
        stream(*text_chunks("Empty.")),
    )
    on_one = client_for(users["editor"])
    on_two = client_for(users["editor"], base_url=other_process.base_url)

    with on_one.chat_stream(project.pk, rojo=rojo.slug, message="List it") as response:
        seen = read_until(parse_sse(response.iter_lines()), "REASONING")
    conversation = seen[0].data["conversation"]
    opened.set()

    with on_two.http.stream("GET", f"/api/conversations/{conversation}/stream") as response:
        relayed = list(parse_sse(response.iter_lines()))

    kinds = [e.type for e in relayed]
    assert kinds[0] == "START" and kinds[-1] == "DONE"
    call_at = kinds.index("TOOL_CALL")
    thinking = [e for e in relayed if e.type == "REASONING"]
    assert "".join(e.data["text"] for e in thinking) == "".join(PIECES)
    assert relayed.index(thinking[-1]) < call_at
    assert "".join(e.data["text"] for e in relayed if e.type == "CHAT") == "Empty."
