"""Counting: usage asked for in the stream and stored per response, the refusal of that
option remembered per rojo, and the estimate of a request's size calibrated from reports."""

import asyncio
from decimal import Decimal

import pytest
from asgiref.sync import sync_to_async

from roject import storage
from rojos.context.window import DEFAULT_CHARS_PER_TOKEN, request_chars, tokens_of
from rojos.models import Rojo, UsageRecord
from tests.support.agent_run import rojo_for, run_turn, valid_history
from tests.support.fake_provider import (
    prompt_tokens,
    stream,
    text_chunks,
    tool_call_chunks,
    usage_chunk,
)

pytestmark = pytest.mark.django_db(transaction=True)


async def records(conversation) -> list[UsageRecord]:
    return [r async for r in UsageRecord.objects.filter(conversation=conversation).order_by("pk")]


async def test_each_response_stores_its_prompt_completion_cached_and_reasoning_tokens(
    fake_provider, project, users
):
    """OpenAI's details (cached input, reasoning) are read into one row per response, with
    the user, project, rojo and message it belongs to; the raw usage stays on the message."""
    fake_provider.add(
        stream(tool_call_chunks([("list_files", {"path": ""})]), usage_chunk(900, 20, cached=600)),
        stream(text_chunks("Nothing there."), usage_chunk(950, 40, cached=900, reasoning=25)),
    )
    rojo = await rojo_for(fake_provider)

    run = await run_turn(project=project, rojo=rojo, user=users["editor"])

    assert run.error is None
    history = await valid_history(run.conversation)
    rows = await records(run.conversation)
    assert [
        (r.prompt_tokens, r.completion_tokens, r.cached_tokens, r.reasoning_tokens) for r in rows
    ] == [(900, 20, 600, 0), (950, 40, 900, 25)]
    assert all(r.reported and r.kind == "reply" for r in rows)
    assert [r.message_id for r in rows] == [history[1].pk, history[3].pk]
    assert {(r.user_id, r.project_id, r.rojo_id) for r in rows} == {
        (users["editor"].pk, project.pk, rojo.pk)
    }
    assert history[3].usage["completion_tokens_details"] == {"reasoning_tokens": 25}


async def test_usage_a_provider_adds_when_asked_is_what_gets_stored(fake_provider, project, users):
    """The provider counts the prompt itself (its own tokenizer) and the stored row says so."""
    fake_provider.add(stream(text_chunks("Hello.")))
    rojo = await rojo_for(fake_provider)

    run = await run_turn(project=project, rojo=rojo, user=users["editor"], message="Hi")

    (row,) = await records(run.conversation)
    assert row.prompt_tokens == prompt_tokens(fake_provider.requests[0]) and row.reported


@pytest.mark.parametrize("shape", ["openai", "fastapi"])
async def test_a_provider_that_refuses_stream_options_is_asked_again_without_and_remembered(
    fake_provider, project, users, shape
):
    """OpenAI-style 400 or FastAPI 422 naming stream_options: the same request goes again
    without it, the rojo remembers, later turns never send it, and usage is estimated."""
    fake_provider.refuse_stream_options = shape
    fake_provider.add(stream(text_chunks("First.")), stream(text_chunks("Second.")))
    rojo = await rojo_for(fake_provider)

    first = await run_turn(project=project, rojo=rojo, user=users["editor"], message="Hi")
    stored = await Rojo.objects.aget(pk=rojo.pk)
    second = await run_turn(project=project, rojo=stored, user=users["editor"], message="Again")

    assert (first.error, first.text, second.error, second.text) == (None, "First.", None, "Second.")
    assert ["stream_options" in r for r in fake_provider.requests] == [True, False, False]
    assert fake_provider.requests[0]["messages"] == fake_provider.requests[1]["messages"]
    assert stored.stream_usage_refused is True
    (row,) = await records(first.conversation)
    sent_chars = request_chars(fake_provider.requests[1])
    assert not row.reported
    assert row.prompt_tokens == tokens_of(sent_chars, DEFAULT_CHARS_PER_TOKEN)


async def test_a_refusal_by_a_summary_request_is_learned_and_the_turn_goes_on(
    fake_provider, project, users
):
    """The first request of a turn may be the summary of its oldest turns (a long
    conversation, now on a server that refuses stream_options): it goes again without the
    option, the model remembers, and the turn's own request goes without it too (the turn
    used to fail on the refusal, learning nothing, and so did every turn after it)."""
    long = "A long brief of the work to come, line after line.\n" * 250  # ~12,750 chars
    fake_provider.add(stream(text_chunks("Noted.")))
    rojo = await rojo_for(fake_provider, context_window=12_000)
    first = await run_turn(project=project, rojo=rojo, user=users["editor"], message=long)
    fake_provider.refuse_stream_options = "openai"
    fake_provider.add(
        stream(text_chunks("The person gave a long brief.")), stream(text_chunks("Ok."))
    )

    second = await run_turn(
        project=project, rojo=rojo, user=users["editor"], message=long + "Go on.",
        conversation=first.conversation,
    )  # fmt: skip

    assert (second.error, second.text) == (None, "Ok.")
    summary, *_ = [m async for m in first.conversation.messages.filter(role="summary")]
    assert summary.content == "The person gave a long brief."
    assert ["stream_options" in r for r in fake_provider.requests[1:]] == [True, False, False]
    assert (await Rojo.objects.aget(pk=rojo.pk)).stream_usage_refused is True


async def test_a_refusal_of_something_else_is_not_retried(fake_provider, project, users):
    """Only a refusal that names stream_options is taken for one: any other 400 ends the turn."""
    from tests.support.fake_provider import http_error

    fake_provider.add(http_error(400))
    rojo = await rojo_for(fake_provider)

    run = await run_turn(project=project, rojo=rojo, user=users["editor"])

    assert run.error is not None and run.error.code == "provider"
    assert len(fake_provider.requests) == 1
    assert not (await Rojo.objects.aget(pk=rojo.pk)).stream_usage_refused


async def test_the_estimate_is_calibrated_by_the_usage_the_provider_reports(
    fake_provider, project, users
):
    """The rojo's ratio follows what the provider counted, is stored for the next turn, and
    puts the estimate of a request like the last one (another 16 KB note read back) within
    10 % of what the provider counts; the uncalibrated estimate is not that close."""
    note = "".join(
        f"line {n:04d}: the harbourmaster considered extraordinary circumstances\n"
        for n in range(260)
    )
    fake_provider.add(
        stream(tool_call_chunks([("get_text_content", {"path": "one.md"})])),
        stream(text_chunks("Read one.")),
        stream(tool_call_chunks([("get_text_content", {"path": "two.md"})])),
        stream(text_chunks("Read two.")),
    )
    rojo = await rojo_for(fake_provider)
    root = await asyncio.to_thread(storage.project_root_create, project.pk)
    (root / "one.md").write_text(note)
    (root / "two.md").write_text(note.replace("harbourmaster", "stationmaster"))
    conversation = None
    for name in ("one.md", "two.md"):
        run = await run_turn(
            project=project,
            rojo=await Rojo.objects.aget(pk=rojo.pk),
            user=users["editor"],
            message=f"Read {name}",
            conversation=conversation,
        )
        conversation = run.conversation
        if name == "one.md":
            ratio_after_one = (await Rojo.objects.aget(pk=rojo.pk)).chars_per_token

    assert run.error is None
    with_two = fake_provider.requests[3]
    counted = prompt_tokens(with_two)
    assert tokens_of(request_chars(with_two), ratio_after_one) == pytest.approx(counted, rel=0.10)
    uncalibrated = tokens_of(request_chars(with_two), DEFAULT_CHARS_PER_TOKEN)
    assert abs(uncalibrated - counted) > 0.25 * counted  # cautious: an over-estimate
    assert await sync_to_async(UsageRecord.objects.filter(rojo=rojo).count)() == 4


@pytest.mark.parametrize("prompt", ["99999999999", "1e300"])
async def test_a_count_too_big_for_any_model_is_estimated_and_the_turn_ends_well(
    fake_provider, project, users, prompt
):
    """A prompt count past what a usage row holds (a provider's bug, not a count): the
    response is recorded with an estimate, as one without usage. Before, the row's insert
    failed (PostgreSQL's integer out of range, SQLite's overflow) after the reply was
    stored, and the turn ended with an internal error, its usage lost."""
    usage = f'{{"choices": [], "usage": {{"prompt_tokens": {prompt}, "completion_tokens": 2}}}}'
    fake_provider.add(stream(text_chunks("Hello."), f"data: {usage}\n\n"))
    rojo = await rojo_for(fake_provider, stream_usage_refused=True)

    run = await run_turn(project=project, rojo=rojo, user=users["editor"])

    assert run.error is None, run.error
    history = await valid_history(run.conversation)
    assert history[-1].content == "Hello."
    [row] = await records(run.conversation)
    assert (row.message_id, row.reported) == (history[-1].pk, False)
    assert row.completion_tokens == tokens_of(len("Hello."), DEFAULT_CHARS_PER_TOKEN)


async def test_cache_reads_beside_a_count_that_overflow_the_row_together_are_estimated(
    fake_provider, project, users
):
    """Anthropic's input tokens and cache reads are added into the prompt count: two counts
    each within a row's integer, summed past it, are no count either, and the response is
    recorded with an estimate. Before, the sum went into the row and its insert failed on
    PostgreSQL (integer out of range), ending the turn with an internal error."""
    most = 2**31 - 1
    usage = (
        f'{{"choices": [], "usage": {{"input_tokens": {most}, '
        f'"cache_read_input_tokens": {most}, "output_tokens": 2}}}}'
    )
    fake_provider.add(stream(text_chunks("Hello."), f"data: {usage}\n\n"))
    rojo = await rojo_for(fake_provider, stream_usage_refused=True)

    run = await run_turn(project=project, rojo=rojo, user=users["editor"])

    assert run.error is None, run.error
    [row] = await records(run.conversation)
    assert row.reported is False and row.prompt_tokens <= most
    assert row.completion_tokens == tokens_of(len("Hello."), DEFAULT_CHARS_PER_TOKEN)


async def test_a_cost_past_what_a_usage_row_holds_is_stored_at_its_most(
    fake_provider, project, users
):
    """Counts a row holds, at prices an admin may type in, can cost more than the row's cost
    column holds (a million dollars): the cost is stored at that column's most, and the turn
    ends well, its usage counted. Before, the insert failed on PostgreSQL (numeric field
    overflow) after the reply was stored, and the turn ended with an internal error."""
    most = 2**31 - 1
    fake_provider.add(stream(text_chunks("Hello."), usage_chunk(most, most)))
    rojo = await rojo_for(
        fake_provider, price_input=Decimal("99999999.9999"), price_output=Decimal("99999999.9999")
    )

    run = await run_turn(project=project, rojo=rojo, user=users["editor"])

    assert run.error is None, run.error
    [row] = await records(run.conversation)
    assert (row.prompt_tokens, row.completion_tokens, row.reported) == (most, most, True)
    assert row.cost == Decimal("999999.99999999")
