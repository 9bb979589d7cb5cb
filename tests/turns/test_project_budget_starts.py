"""A project's budget holds under parallel chats: each start counts it under the project's
lock, with the replies still running reserving what their rojo may write in a step. Three
members each send four chats at once against a daily budget of 30 tokens, each reply using
15: two start, the ten others are refused with the budget's sentence (before: nine started,
135 tokens used)."""

from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db.models import Sum

from rojos.models import Message, TurnRecord, UsageRecord
from tests.support.fake_provider import stream, text_chunks, usage_chunk
from tests.support.helpers import make_rojo
from tests.support.live_server import parse_sse

pytestmark = pytest.mark.django_db(transaction=True)


def test_parallel_chats_start_only_as_many_as_the_projects_budget_holds(
    client_for, fake_provider, project, users, settings
):
    settings.ROJO_PROJECT_DAILY_TOKENS = 30
    rojo = make_rojo(fake_provider.base_url, max_output_tokens=20)
    for _ in range(2):  # held a moment, so that every chat is sent while they run
        fake_provider.add(stream(*text_chunks("Hi."), usage_chunk(10, 5), first_byte_delay=1))
    clients = [client_for(users[name]) for name in ("owner", "editor", "viewer") for _ in range(4)]

    def send(client):
        payload = {"rojo": rojo.slug, "message": "Hello"}
        with client.chat_stream(project.pk, **payload) as response:
            if response.status_code != 200:
                return response.status_code, response.read().decode()
            return 200, [event.type for event in parse_sse(response.iter_lines())]

    with ThreadPoolExecutor(len(clients)) as pool:
        answers = list(pool.map(send, clients))

    accepted = [events for status, events in answers if status == 200]
    refused = [detail for status, detail in answers if status != 200]
    assert len(accepted) == 2 and all(events[-1] == "DONE" for events in accepted), answers
    assert len(refused) == 10
    for detail in refused:
        assert "the project 'Demo Project'" in detail, detail
        assert "daily budget of 30 tokens" in detail, detail
    assert {status for status, _ in answers} == {200, 429}
    assert len(fake_provider.requests) == 2
    assert TurnRecord.objects.count() == 2 and Message.objects.filter(role="user").count() == 2
    used = UsageRecord.objects.aggregate(p=Sum("prompt_tokens"), c=Sum("completion_tokens"))
    assert used["p"] + used["c"] == 30
