"""The issue's long conversation through the chat API: 30 messages, each reading a 16 KB note,
on a model whose window is 12,000 tokens, declared right or 8 times too large."""

import pytest

from roject.storage import project_root
from rojos.models import Message, Rojo, UsageRecord
from tests.support.fake_provider import OVERFLOW_SHAPES, Window, prompt_tokens
from tests.support.helpers import assert_history_valid, make_rojo, stored_history
from tests.support.live_server import ApiClient
from tests.support.long_conversation import (
    FIRST_QUESTION,
    NOTES,
    answer,
    code_word,
    model,
    note_text,
    notes_write,
    question,
)

pytestmark = pytest.mark.django_db(transaction=True)

WINDOW = 12_000
SYSTEM = "You answer questions about the project's notes."


@pytest.fixture
def editor_client(asgi_server, users, settings):
    settings.ROJO_USER_MESSAGES_PER_MINUTE = 0  # 31 messages in well under a minute
    client = ApiClient(asgi_server, users["editor"])
    yield client
    client.close()


def converse(client, project, rojo) -> tuple[int, list[list]]:
    """Ask about each note in turn, then about the first; the conversation and its events."""
    notes_write(project_root(project.pk))
    conversation = None
    turns = []
    for n in [*range(1, NOTES + 1), 0]:
        message = question(n) if n else FIRST_QUESTION
        events = client.chat(project.pk, rojo=rojo.slug, message=message, conversation=conversation)
        conversation = events[0].data["conversation"]
        turns.append(events)
    return conversation, turns


def replies(turn) -> str:
    return "".join(e.data["text"] for e in turn if e.type == "CHAT")


def assert_requests_sound(requests: list[dict]) -> None:
    """Each request starts with the system prompt, ends with a user message or results, and
    answers every call it sends right after it, once."""
    for n, request in enumerate(requests):
        messages = request["messages"]
        if messages[0]["role"] == "system" and "working memory" in messages[0]["content"]:
            continue  # a summary request
        assert messages[0] == {"role": "system", "content": SYSTEM} or messages[0][
            "content"
        ].startswith(SYSTEM + "\n\nSummary of the earlier part"), n
        assert messages[-1]["role"] in ("user", "tool"), n
        for i, message in enumerate(messages):
            if message.get("tool_calls"):
                ids = [c["id"] for c in message["tool_calls"]]
                after = messages[i + 1 : i + 1 + len(ids)]
                assert [m.get("tool_call_id") for m in after] == ids, n
            elif message["role"] == "tool":
                assert messages[i - 1]["role"] in ("assistant", "tool"), n


def assert_every_turn_answered_from_what_it_read(turns, conversation) -> None:
    for n, turn in enumerate(turns[:NOTES], start=1):
        assert [e for e in turn if e.type == "ERROR"] == [], f"turn {n}"
        assert replies(turn) == answer(n), f"turn {n}"
    assert replies(turns[-1]) == code_word(1)
    history = stored_history(conversation)
    assert_history_valid(history)
    # The stored conversation is whole: every note as it was read, every question.
    results = [m.content for m in history if m.role == Message.Role.TOOL]
    assert results == [note_text(n) for n in range(1, NOTES + 1)]
    asked = [m.content for m in history if m.role == Message.Role.USER]
    assert asked == [*map(question, range(1, NOTES + 1)), FIRST_QUESTION]


def test_thirty_notes_through_a_12000_token_window_never_overflow_it(
    editor_client, fake_provider, project
):
    """Every answer comes from the note just read, no request is over the window (the
    provider never had to refuse or cut one), and the first note's code word is still
    known at the end, from the summary or the earlier answers."""
    fake_provider.window = Window(tokens=WINDOW, shape="openai")
    fake_provider.responder = model
    rojo = make_rojo(fake_provider.base_url, context_window=WINDOW, system_prompt=SYSTEM)

    conversation, turns = converse(editor_client, project, rojo)

    assert_every_turn_answered_from_what_it_read(turns, conversation)
    assert_requests_sound(fake_provider.requests)
    assert fake_provider.overflowed == [] and fake_provider.truncated == []
    assert max(map(prompt_tokens, fake_provider.requests)) <= WINDOW
    summaries = [e for turn in turns for e in turn if e.type == "SUMMARY"]
    assert summaries and all(code_word(1) in s.data["text"] for s in summaries[:1])
    stored = Message.objects.filter(conversation_id=conversation, role="summary").count()
    assert stored == len(summaries)
    summary_calls = UsageRecord.objects.filter(conversation_id=conversation, kind="summary")
    assert summary_calls.count() >= len(summaries)
    assert any(
        "left out to fit the context window" in str(r["messages"]) for r in fake_provider.requests
    )


@pytest.mark.parametrize("shape", OVERFLOW_SHAPES)
def test_a_window_declared_8_times_too_large_is_corrected_from_the_providers_refusal(
    editor_client, fake_provider, project, shape
):
    """The provider refuses the first request over its real window in its own words; the
    turn learns the window it states, sends the request again smaller (never unchanged),
    and the conversation goes on as if the window had been declared right."""
    fake_provider.window = Window(tokens=WINDOW, shape=shape)
    fake_provider.responder = model
    rojo = make_rojo(fake_provider.base_url, context_window=8 * WINDOW, system_prompt=SYSTEM)

    conversation, turns = converse(editor_client, project, rojo)

    assert_every_turn_answered_from_what_it_read(turns, conversation)
    assert_requests_sound(fake_provider.requests)
    assert fake_provider.overflowed, "the declared window was never found out"
    for refused in fake_provider.overflowed:
        again = fake_provider.requests[refused + 1]
        assert prompt_tokens(again) < prompt_tokens(fake_provider.requests[refused])
        assert refused + 1 not in fake_provider.overflowed
    assert Rojo.objects.get(pk=rojo.pk).refused_window == WINDOW


def test_an_ollama_window_is_learned_so_its_silent_cut_never_happens(
    editor_client, fake_provider, project
):
    """Ollama answers no error: over num_ctx it drops the prompt's start. With the window
    learned from /api/show, no request is ever over it (the fixture fails the test if the
    provider ever had to cut one)."""
    fake_provider.window = Window(tokens=WINDOW, shape="ollama", listed_by="ollama")
    fake_provider.responder = model
    rojo = make_rojo(fake_provider.base_url, system_prompt=SYSTEM)

    conversation, turns = converse(editor_client, project, rojo)

    assert_every_turn_answered_from_what_it_read(turns, conversation)
    assert Rojo.objects.get(pk=rojo.pk).listed_window == WINDOW
    assert fake_provider.truncated == []
