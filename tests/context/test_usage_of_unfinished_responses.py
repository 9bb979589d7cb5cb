"""Responses that never finished are counted: a reply or a summary stopped, cut by a
disconnect or an error mid-stream, records the usage the provider sent before its end, else
an estimate (`reported` False) of the request, as fitting it to the window sized it, and of
the text, thinking and call arguments that streamed. The provider bills them all the same,
and budgets that did not count them could be passed by a Stop just before each reply's end.
"""

import threading

import pytest
from asgiref.sync import sync_to_async

from rojos.context.window import DEFAULT_CHARS_PER_TOKEN, request_chars, tokens_of
from rojos.conversations.usage_report import conversation_usage
from rojos.models import Conversation, Rojo, UsageRecord
from tests.support.agent_run import rojo_for, run_turn, valid_history
from tests.support.fake_provider import (
    Gate,
    chunk,
    error_chunk,
    http_error,
    stream,
    text_chunks,
    tool_call_chunks,
    usage_chunk,
)
from tests.support.held_store import message_store_held
from tests.support.helpers import assert_history_valid, make_rojo, stored_history
from tests.support.live_server import parse_sse

pytestmark = pytest.mark.django_db(transaction=True)

HALF = "The first half of the answer, and"


@pytest.fixture(autouse=True)
def no_retries(settings):
    settings.ROJO_PROVIDER_RETRIES = 0


async def records(conversation) -> list[UsageRecord]:
    return [r async for r in UsageRecord.objects.filter(conversation=conversation).order_by("pk")]


def estimate(chars: int, ratio: float | None = None) -> int:
    return tokens_of(chars, ratio or DEFAULT_CHARS_PER_TOKEN)


ENDINGS = {
    "error event": dict(chunks=[error_chunk("The server is overloaded.")]),
    "disconnect": dict(chunks=[], cut=True),
    "no finish reason": dict(chunks=[], done=False),  # older llama.cpp's dropped error line
}


@pytest.mark.parametrize("ending", ENDINGS)
async def test_a_reply_cut_short_records_an_estimate_of_its_request_and_its_text(
    fake_provider, project, users, ending
):
    """No usage came: the prompt is the request's size at the model's ratio, the completion
    the text that streamed; the row is linked to the kept message and marked an estimate."""
    end = ENDINGS[ending]
    fake_provider.add(
        stream(
            text_chunks(HALF, pieces=3, finish=None),
            *end["chunks"],
            cut=end.get("cut", False),
            done=end.get("done", True),
        )
    )
    rojo = await rojo_for(fake_provider)

    run = await run_turn(project=project, rojo=rojo, user=users["editor"])

    assert run.error is not None and run.error.code == "provider"
    history = await valid_history(run.conversation)
    assert [(m.role, m.content) for m in history] == [("user", "Please help."), ("assistant", HALF)]
    (row,) = await records(run.conversation)
    assert not row.reported and row.kind == "reply"
    assert row.prompt_tokens == estimate(request_chars(fake_provider.requests[0]))
    assert row.completion_tokens == estimate(len(HALF))
    owners = (history[1].pk, users["editor"].pk, project.pk, rojo.pk)
    assert (row.message_id, row.user_id, row.project_id, row.rojo_id) == owners


@pytest.mark.parametrize("ending", ["error event", "disconnect"])
async def test_usage_the_provider_sent_before_an_error_is_recorded_as_reported(
    fake_provider, project, users, ending
):
    """The usage chunk comes after the finish reason; a failure after it does not lose it
    (a lost connection or an error object there ends no turn at all: the response was
    whole)."""
    end = ENDINGS[ending]
    fake_provider.add(
        stream(
            text_chunks("A whole answer."),
            usage_chunk(900, 40, cached=300),
            *end["chunks"],
            cut=end.get("cut", False),
        )
    )
    rojo = await rojo_for(fake_provider)

    run = await run_turn(project=project, rojo=rojo, user=users["editor"])

    assert run.error is None
    history = await valid_history(run.conversation)
    (row,) = await records(run.conversation)
    counts = (row.prompt_tokens, row.completion_tokens, row.cached_tokens, row.reported)
    assert counts == (900, 40, 300, True)
    assert row.message_id == history[-1].pk
    assert history[-1].content == "A whole answer." and history[-1].usage["prompt_tokens"] == 900


async def test_the_estimate_counts_the_thinking_and_the_call_arguments_that_streamed(
    fake_provider, project, users
):
    """A reply that thought, then began a call and was cut: the half call is dropped (never
    run, nothing to answer), its arguments so far are counted with the thinking."""
    thought = "I should write the notes file with the plan. " * 4
    call = tool_call_chunks(
        [("write_text_content", {"path": "notes.md", "text": "Step one, step two."})],
        finish=None,
    )
    fake_provider.add(
        stream(chunk({"role": "assistant", "reasoning_content": thought}), call[:3], cut=True)
    )
    rojo = await rojo_for(fake_provider)

    run = await run_turn(project=project, rojo=rojo, user=users["editor"])

    assert run.error is not None and run.error.code == "provider"
    history = await valid_history(run.conversation)
    assert [(m.role, m.reasoning) for m in history][1:] == [("assistant", thought)]
    functions = [c["choices"][0]["delta"]["tool_calls"][0]["function"] for c in call[:3]]
    arguments = "".join(function.get("arguments", "") for function in functions)
    assert arguments  # part of them came
    (row,) = await records(run.conversation)
    assert not row.reported and row.message_id == history[1].pk
    assert row.completion_tokens == estimate(len(thought) + len(arguments))


async def test_a_reply_cut_before_anything_was_kept_is_counted_in_its_turn(
    fake_provider, project, users
):
    """Only part of a call came: no message is kept, and the row is linked to the turn's user
    message, so the turn's figures in the chat show it (as an estimate)."""
    call = tool_call_chunks([("list_files", {"path": "docs"})], finish=None)
    fake_provider.add(stream(call[:2], cut=True))
    rojo = await rojo_for(fake_provider)

    run = await run_turn(project=project, rojo=rojo, user=users["editor"])

    assert run.error is not None
    history = await valid_history(run.conversation)
    assert [m.role for m in history] == ["user"]
    (row,) = await records(run.conversation)
    assert row.message_id == history[0].pk and not row.reported
    conversation = await Conversation.objects.select_related("rojo").aget(pk=run.conversation.pk)
    usage = await sync_to_async(conversation_usage)(conversation=conversation)
    turn = usage["turns"][str(history[0].pk)]
    assert turn["prompt"] == row.prompt_tokens > 0 and turn["estimated"] is True


async def test_a_request_refused_before_any_answer_records_nothing(fake_provider, project, users):
    """An HTTP error is no response: nothing was generated, nothing is counted."""
    fake_provider.add(http_error(503))
    rojo = await rojo_for(fake_provider)

    run = await run_turn(project=project, rojo=rojo, user=users["editor"])

    assert run.error is not None and run.error.code == "provider"
    assert await records(run.conversation) == []


async def test_a_request_sent_again_after_a_refusal_and_then_cut_is_counted_once(
    fake_provider, project, users
):
    """The provider refused `stream_options` (no answer: nothing to count), the request went
    again without it and was cut mid-reply: one row, the estimate of the request answered."""
    fake_provider.refuse_stream_options = "openai"
    fake_provider.add(stream(text_chunks(HALF, finish=None), error_chunk("Overloaded.")))
    rojo = await rojo_for(fake_provider)

    run = await run_turn(project=project, rojo=rojo, user=users["editor"])

    assert run.error is not None and run.error.code == "provider"
    assert ["stream_options" in r for r in fake_provider.requests] == [True, False]
    (row,) = await records(run.conversation)
    assert not row.reported
    assert row.prompt_tokens == estimate(request_chars(fake_provider.requests[1]))


async def test_a_summary_cut_short_is_counted_as_a_summary_of_its_turn(
    fake_provider, project, users
):
    """The oldest turn had to be summarised to fit the window and the summary's stream
    failed halfway: its request and text are counted, in the turn that asked for it."""
    long = "A long brief of the work to come, line after line.\n" * 250  # ~12,750 chars
    fake_provider.add(stream(text_chunks("Noted.")))
    rojo = await rojo_for(fake_provider, context_window=12_000)
    first = await run_turn(project=project, rojo=rojo, user=users["editor"], message=long)
    fake_provider.add(
        stream(text_chunks("The person gave", finish=None), error_chunk("Upstream timed out."))
    )
    stored = await Rojo.objects.aget(pk=rojo.pk)

    second = await run_turn(
        project=project, rojo=stored, user=users["editor"], message=long + "Go on.",
        conversation=first.conversation,
    )  # fmt: skip

    assert second.error is not None and second.error.code == "provider"
    history = await valid_history(first.conversation)
    assert [m.role for m in history] == ["user", "assistant", "user"]
    _, summary = await records(first.conversation)
    assert (summary.kind, summary.reported, summary.message_id) == ("summary", False, history[2].pk)
    sent = fake_provider.requests[1]
    assert "tools" not in sent  # the summary's request, not the turn's
    assert summary.prompt_tokens == estimate(request_chars(sent), stored.chars_per_token)
    assert summary.completion_tokens == estimate(len("The person gave"), stored.chars_per_token)


async def test_the_parts_of_a_summary_read_before_one_failed_are_counted(
    fake_provider, project, users
):
    """A turn too long for one summary request is summarised in parts: the first part's
    answer came whole with its usage, the second failed. Both were billed; no summary is
    stored, so both rows belong to the turn that asked for them."""
    long = "A long brief of the work to come, line after line.\n" * 250  # ~12,750 chars
    fake_provider.add(stream(text_chunks("Noted, and here is my long plan. " * 600)))
    rojo = await rojo_for(fake_provider, context_window=12_000)
    first = await run_turn(project=project, rojo=rojo, user=users["editor"], message=long)
    fake_provider.add(
        stream(text_chunks("The person gave a long brief.")),
        stream(text_chunks("The rojo", finish=None), error_chunk("Upstream timed out.")),
    )
    stored = await Rojo.objects.aget(pk=rojo.pk)

    second = await run_turn(
        project=project, rojo=stored, user=users["editor"], message=long + "Go on.",
        conversation=first.conversation,
    )  # fmt: skip

    assert second.error is not None and second.error.code == "provider"
    assert len(fake_provider.requests) == 3  # the first turn's, and the summary's two parts
    history = await valid_history(first.conversation)
    assert [m.role for m in history] == ["user", "assistant", "user"]
    _, *parts = await records(first.conversation)
    assert [(r.kind, r.message_id) for r in parts] == [("summary", history[2].pk)] * 2
    whole, cut = sorted(parts, key=lambda r: not r.reported)
    assert whole.reported and not cut.reported
    assert whole.completion_tokens > 0
    assert cut.completion_tokens == estimate(len("The rojo"), stored.chars_per_token)


def test_a_reply_stopped_while_it_is_stored_is_counted(
    client_for, users, project, fake_provider, crossings, settings
):
    """The reply streamed whole, with its usage, and was being stored (the database slow)
    when Stop came: the reply is kept and its usage recorded, linked to it. Before, the Stop
    cut between the store and the count: the reply was kept and never counted, a way past
    a budget for whoever stops each reply as it ends. The reply waits at a gate until the
    database is locked, and the Stop goes once its store was sent to a database thread."""
    settings.ROJO_DRAFT_SECONDS = 600  # the reply's first insert is its final store
    whole = "A whole answer."
    locked = threading.Event()
    fake_provider.add(stream(Gate(locked), text_chunks(whole), usage_chunk(900, 40)))
    rojo = make_rojo(fake_provider.base_url)
    client = client_for(users["editor"])
    with client.chat_stream(project.pk, rojo=rojo.slug, message="Go") as response:
        events = parse_sse(response.iter_lines())
        conversation = next(events).data["conversation"]
        with message_store_held(conversation, crossings, locked):
            stopped = client.post(f"/api/conversations/{conversation}/stop")
            assert stopped.json() == {"stopping": True}  # the turn's task is cancelled now
        rest = [(e.type, e.data) for e in events]

    assert rest[-2:] == [("ERROR", {"message": "Stopped.", "code": "stopped"}), ("DONE", {})]
    history = stored_history(conversation)
    assert_history_valid(history)
    assert [(m.role, m.content) for m in history] == [("user", "Go"), ("assistant", whole)]
    row = UsageRecord.objects.get(conversation_id=conversation)
    counts = (row.prompt_tokens, row.completion_tokens, row.reported, row.message_id)
    assert counts == (900, 40, True, history[1].pk)
