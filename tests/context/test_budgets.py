"""Budgets: a message over a user's or project's daily or monthly budget is refused before any
model call (429, which budget, when it resets); a turn that crosses one finishes its step and
stops with a clear error; the admin's rows replace the settings' defaults; replies stopped
before their end count too."""

import threading
from decimal import Decimal

import pytest

from rojos.context.window import DEFAULT_CHARS_PER_TOKEN, request_chars, tokens_of
from rojos.models import Message, UsageBudget, UsageRecord
from tests.support.fake_provider import Gate, stream, text_chunks, tool_call_chunks, usage_chunk
from tests.support.helpers import assert_history_valid, make_rojo, stored_history
from tests.support.live_server import ApiClient, parse_sse, read_until

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def editor_client(asgi_server, users):
    client = ApiClient(asgi_server, users["editor"])
    yield client
    client.close()


def used(user, project, tokens: int, cost: str | None = None) -> None:
    UsageRecord.objects.create(
        user=user, project=project, prompt_tokens=tokens, cost=cost and Decimal(cost)
    )


def test_a_message_over_the_users_daily_tokens_is_refused_before_any_model_call(
    editor_client, fake_provider, project, users, settings
):
    settings.ROJO_USER_DAILY_TOKENS = 1_000
    used(users["editor"], project, 1_000)
    rojo = make_rojo(fake_provider.base_url)

    response = editor_client.post(
        f"/api/projects/{project.pk}/chat", json={"rojo": rojo.slug, "message": "Hello"}
    )

    assert response.status_code == 429
    detail = response.json()["detail"]
    assert detail.startswith("You have used up your daily budget of 1,000 tokens (today)")
    assert "it resets at midnight UTC, in " in detail
    assert fake_provider.requests == [] and not Message.objects.exists()


def test_the_projects_monthly_cost_budget_counts_everyone_in_it(
    editor_client, fake_provider, project, users, settings
):
    settings.ROJO_PROJECT_MONTHLY_COST = 0.05
    used(users["owner"], project, 10, "0.03")
    used(users["viewer"], project, 10, "0.02")
    rojo = make_rojo(fake_provider.base_url)

    response = editor_client.post(
        f"/api/projects/{project.pk}/chat", json={"rojo": rojo.slug, "message": "Hello"}
    )

    assert response.status_code == 429
    assert response.json()["detail"].startswith(
        "You have used up the project 'Demo Project''s monthly budget of $0.05 (this month); "
        "it resets on "
    )
    assert fake_provider.requests == []


def test_the_admins_budget_replaces_the_default_for_that_user(
    editor_client, asgi_server, fake_provider, project, users, settings
):
    """An empty override exempts the editor from the default; the owner's own is lower."""
    settings.ROJO_USER_DAILY_TOKENS = 1_000
    UsageBudget.objects.create(user=users["editor"], period="day")
    UsageBudget.objects.create(user=users["owner"], period="day", max_tokens=10)
    used(users["editor"], project, 5_000)
    used(users["owner"], project, 10)
    fake_provider.add(stream(text_chunks("Hello.")))
    rojo = make_rojo(fake_provider.base_url)

    events = editor_client.chat(project.pk, rojo=rojo.slug, message="Hello")
    owner = ApiClient(asgi_server, users["owner"])
    refused = owner.post(
        f"/api/projects/{project.pk}/chat", json={"rojo": rojo.slug, "message": "Hi"}
    )
    owner.close()

    assert [e.type for e in events] == ["START", "CHAT", "DONE"]
    assert refused.status_code == 429 and "daily budget of 10 tokens" in refused.json()["detail"]


def test_a_turn_that_crosses_a_budget_finishes_its_step_then_stops(
    editor_client, fake_provider, project, users, settings
):
    """The step that crossed it runs its tool call; the next model call is not made."""
    settings.ROJO_USER_DAILY_TOKENS = 1_000
    fake_provider.add(
        stream(tool_call_chunks([("list_files", {"path": ""})]), usage_chunk(1_200, 30)),
        stream(text_chunks("never asked for")),
    )
    fake_provider.allow_leftovers()
    rojo = make_rojo(fake_provider.base_url)

    events = editor_client.chat(project.pk, rojo=rojo.slug, message="List the files")

    assert [e.type for e in events] == ["START", "TOOL_CALL", "TOOL_RESULT", "ERROR", "DONE"]
    assert events[3].data["code"] == "budget"
    assert (
        events[3]
        .data["message"]
        .startswith(
            "This reply stopped: it used up your daily budget of 1,000 tokens (today); it resets"
        )
    )
    assert len(fake_provider.requests) == 1
    history = stored_history(events[0].data["conversation"])
    assert_history_valid(history)
    assert [m.role for m in history] == ["user", "assistant", "tool"]
    again = editor_client.post(
        f"/api/projects/{project.pk}/chat", json={"rojo": rojo.slug, "message": "More"}
    )
    assert again.status_code == 429


def test_a_user_who_stops_every_reply_before_its_end_still_uses_up_their_budget(
    editor_client, fake_provider, project, users, settings
):
    """Stop while the reply streams (held at a gate, so the Stop comes mid-reply, before its
    usage chunk): the reply is counted all the same, as an estimate of what was sent and
    shown; stopping each reply is no way around a budget."""
    half = "The first half of the answer, and"
    gates = [threading.Event(), threading.Event()]
    fake_provider.add(
        *(stream(text_chunks(half, finish=None), Gate(g), text_chunks(" the rest.")) for g in gates)
    )
    rojo = make_rojo(fake_provider.base_url)

    def send_and_stop(gate: threading.Event) -> tuple[int, list]:
        try:
            with editor_client.chat_stream(project.pk, rojo=rojo.slug, message="Go") as response:
                events = parse_sse(response.iter_lines())
                conversation = next(events).data["conversation"]
                read_until(events, "CHAT")
                stopped = editor_client.post(f"/api/conversations/{conversation}/stop")
                assert stopped.json() == {"stopping": True}
                return conversation, [(e.type, e.data) for e in events]
        finally:
            gate.set()  # the provider's side of the stream ends

    conversation, rest = send_and_stop(gates[0])

    assert rest[-2:] == [("ERROR", {"message": "Stopped.", "code": "stopped"}), ("DONE", {})]
    history = stored_history(conversation)
    assert_history_valid(history)
    assert [(m.role, m.content) for m in history] == [("user", "Go"), ("assistant", half)]
    row = UsageRecord.objects.get(conversation_id=conversation)
    assert (row.user_id, row.message_id, row.reported) == (users["editor"].pk, history[1].pk, False)
    assert row.prompt_tokens == tokens_of(
        request_chars(fake_provider.requests[0]), DEFAULT_CHARS_PER_TOKEN
    )
    assert row.completion_tokens == tokens_of(len(half), DEFAULT_CHARS_PER_TOKEN)

    settings.ROJO_USER_DAILY_TOKENS = row.total_tokens + 1  # used up by one more stopped reply
    send_and_stop(gates[1])
    refused = editor_client.post(
        f"/api/projects/{project.pk}/chat", json={"rojo": rojo.slug, "message": "Go"}
    )

    assert refused.status_code == 429
    assert "your daily budget of" in refused.json()["detail"]
    assert UsageRecord.objects.filter(user=users["editor"], reported=False).count() == 2
