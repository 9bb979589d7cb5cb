"""Budgets hold under parallel chats: each start counts the project's and the user's under
their locks, with the replies still running reserving what their rojo may write in a step,
and each step after the first counts what the other replies recorded meanwhile. Three
members each send four chats at once against a project's daily budget of 30 tokens, each
reply using 15: two start, the ten others are refused with the budget's sentence (before:
nine started, 135 tokens used); one user's twelve against their own budget, the same."""

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection
from django.db.models import Sum

from rojos.models import Message, TurnRecord, UsageRecord
from tests.support.fake_provider import Gate, stream, text_chunks, tool_call_chunks, usage_chunk
from tests.support.helpers import make_rojo
from tests.support.live_server import parse_sse

pytestmark = pytest.mark.django_db(transaction=True)


def held_replies(fake_provider, chats: int) -> threading.Barrier:
    """Two replies of 15 tokens that send nothing until each of the `chats` had its answer's
    status (the barrier, which every sender waits at once it has it), so that every chat is
    started or refused while both replies run, however slowly a loaded server answers."""
    answered = threading.Event()
    for _ in range(2):
        fake_provider.add(stream(Gate(answered), *text_chunks("Hi."), usage_chunk(10, 5)))
    return threading.Barrier(chats, action=answered.set, timeout=60)


def test_parallel_chats_start_only_as_many_as_the_projects_budget_holds(
    client_for, fake_provider, project, users, settings
):
    settings.ROJO_PROJECT_DAILY_TOKENS = 30
    rojo = make_rojo(fake_provider.base_url, max_output_tokens=20)
    clients = [client_for(users[name]) for name in ("owner", "editor", "viewer") for _ in range(4)]
    answered = held_replies(fake_provider, len(clients))

    def send(client):
        payload = {"rojo": rojo.slug, "message": "Hello"}
        with client.chat_stream(project.pk, **payload) as response:
            answered.wait()
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


def _sent(client, rojo, project, answered: threading.Barrier | None = None):
    with client.chat_stream(project.pk, rojo=rojo.slug, message="Hello") as response:
        if answered is not None:
            answered.wait()
        return response.status_code, response.read().decode()


@pytest.mark.parametrize("at_once", [3, 0])  # 3: ROJO_USER_CONCURRENT_TURNS' default; 0: none
def test_parallel_chats_of_one_user_start_only_as_many_as_their_budget_holds(
    client_for, fake_provider, project, users, settings, at_once
):
    """Before, the user's budget was read only by the chat's first check: as many started
    as the user's replies at once allowed (3: 45 tokens of 30; with no such limit all 12,
    180 tokens)."""
    settings.ROJO_USER_DAILY_TOKENS = 30
    settings.ROJO_USER_CONCURRENT_TURNS = at_once
    rojo = make_rojo(fake_provider.base_url, max_output_tokens=20)
    clients = [client_for(users["editor"]) for _ in range(12)]
    answered = held_replies(fake_provider, len(clients))

    with ThreadPoolExecutor(len(clients)) as pool:
        answers = list(pool.map(lambda client: _sent(client, rojo, project, answered), clients))

    assert [status for status, _ in answers].count(200) == 2, answers
    refused = [detail for status, detail in answers if status != 200]
    assert any("your daily budget of 30 tokens" in detail for detail in refused), refused
    assert TurnRecord.objects.count() == 2
    used = UsageRecord.objects.aggregate(p=Sum("prompt_tokens"), c=Sum("completion_tokens"))
    assert used["p"] + used["c"] == 30


@pytest.mark.parametrize("scope", ["project", "user"])
def test_a_running_reply_asks_no_more_once_other_replies_used_the_budget_up(
    client_for, fake_provider, project, users, settings, scope
):
    """Two replies of three steps (30 tokens each) in lockstep against a budget of 100:
    each step after the first counts what both recorded. Each records its step before it
    counts, so the later to count sees both steps (120): at most one third call, when the
    other's second step was not recorded yet. Before, each counted only its own usage, and
    both made their third call (180 tokens in all)."""
    setattr(settings, f"ROJO_{scope.upper()}_DAILY_TOKENS", 100)
    senders = [users["owner"], users["editor"]] if scope == "project" else [users["editor"]] * 2
    rojo = make_rojo(fake_provider.base_url, max_output_tokens=5)
    steps = [threading.Barrier(2) for _ in range(2)]  # the two replies' steps in lockstep
    used_when_asked: list[int] = []

    def reply(body):
        step = sum(1 for m in body["messages"] if m["role"] == "tool")
        try:  # what was recorded when this model call was made
            sums = UsageRecord.objects.aggregate(p=Sum("prompt_tokens"), c=Sum("completion_tokens"))
            used_when_asked.append((sums["p"] or 0) + (sums["c"] or 0))
        finally:
            connection.close()  # the provider's thread
        call = tool_call_chunks([("list_files", {"path": ""})])
        chunks = call if step < 2 else text_chunks("Done.")
        return stream(*chunks, usage_chunk(20, 10), together=steps[step] if step < 2 else None)

    fake_provider.responder = reply
    clients = [client_for(user) for user in senders]

    with ThreadPoolExecutor(2) as pool:
        answers = list(pool.map(lambda client: _sent(client, rojo, project), clients))

    assert [status for status, _ in answers] == [200, 200]
    # The first steps are asked together (the barrier); each second one after its own first
    # step was recorded, and the other's too unless that one was still being stored.
    asked = sorted(used_when_asked)
    assert asked[:2] == [0, 0] and set(asked[2:4]) <= {30, 60}, used_when_asked
    assert len(used_when_asked) <= 5, used_when_asked  # one third call at most
    assert any("used up" in text for _, text in answers), answers
    used = UsageRecord.objects.aggregate(p=Sum("prompt_tokens"), c=Sum("completion_tokens"))
    assert used["p"] + used["c"] <= 150
