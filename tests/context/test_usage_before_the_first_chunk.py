"""A response stopped before its first chunk is counted once the provider took the request:
its answer had begun (OpenRouter's `: OPENROUTER PROCESSING` comments while the model reads
a long prompt), the provider bills the prompt, and a budget that did not count it could be
passed by a Stop as each reply's first words were due."""

import re
import threading

import pytest

from rojos.context.window import DEFAULT_CHARS_PER_TOKEN, request_chars, tokens_of
from rojos.models import Message, UsageRecord
from tests.support.fake_provider import Gate, error_chunk, stream, text_chunks
from tests.support.helpers import make_rojo
from tests.support.live_server import parse_sse, wait_until

pytestmark = pytest.mark.django_db(transaction=True)

METRICS_TOKEN = "metrics-of-the-test"
PROCESSING = ": OPENROUTER PROCESSING\n\n"


@pytest.fixture(autouse=True)
def no_retries(settings):
    settings.ROJO_PROVIDER_RETRIES = 0
    settings.ROJO_METRICS_TOKEN = METRICS_TOKEN


def first_bytes_seen(client) -> float:
    """How many responses' first bytes the server has read (its /metrics, over HTTP)."""
    page = client.http.get("/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"})
    assert page.status_code == 200, page.status_code
    found = re.search(r"^rojo_provider_first_chunk_seconds_count (\S+)$", page.text, re.M)
    return float(found[1]) if found else 0.0


def test_a_reply_stopped_while_the_provider_processes_the_prompt_is_counted(
    client_for, users, project, fake_provider
):
    """The provider answered 200 and sent a processing comment, no chunk yet, when Stop came:
    one usage row, an estimate of the request and nothing written, linked to the user's
    message. Before, nothing was counted."""
    held = threading.Event()
    fake_provider.add(stream(PROCESSING, Gate(held), text_chunks("Too late.")))
    rojo = make_rojo(fake_provider.base_url)
    client = client_for(users["editor"])
    before = first_bytes_seen(client)
    try:
        with client.chat_stream(project.pk, rojo=rojo.slug, message="Read all of this") as reply:
            events = parse_sse(reply.iter_lines())
            conversation = next(events).data["conversation"]
            wait_until(lambda: first_bytes_seen(client) > before)  # the comment was read
            stopped = client.post(f"/api/conversations/{conversation}/stop")
            assert stopped.json() == {"stopping": True}
            rest = [(e.type, e.data) for e in events]
    finally:
        held.set()

    assert rest[-2:] == [("ERROR", {"message": "Stopped.", "code": "stopped"}), ("DONE", {})]
    row = UsageRecord.objects.get(conversation_id=conversation)
    asked = tokens_of(request_chars(fake_provider.requests[0]), DEFAULT_CHARS_PER_TOKEN)
    assert (row.prompt_tokens, row.completion_tokens, row.reported) == (asked, 0, False)
    assert row.message_id == Message.objects.get(conversation_id=conversation, role="user").pk


def test_a_200_holding_only_an_error_is_not_counted(client_for, users, project, fake_provider):
    """The provider took the request (200) but its stream's first chunk is an error: it
    answered nothing, so nothing is billed, and a user whose provider keeps refusing is not
    charged an estimate for each try."""
    fake_provider.add(stream(error_chunk("The model is overloaded, try again later.")))
    rojo = make_rojo(fake_provider.base_url)
    client = client_for(users["editor"])
    with client.chat_stream(project.pk, rojo=rojo.slug, message="Read all of this") as reply:
        events = [(e.type, e.data) for e in parse_sse(reply.iter_lines())]
        conversation = events[0][1]["conversation"]

    assert events[-2][0] == "ERROR" and "overloaded" in events[-2][1]["message"]
    assert not UsageRecord.objects.filter(conversation_id=conversation).exists()
