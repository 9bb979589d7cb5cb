"""The provider self-test against the fake provider answering like each real provider."""

import threading

import pytest

from rojos.context.discovery import window_discovery_forget
from rojos.errors import RojoKeyRefused
from rojos.models import Rojo
from rojos.models.capabilities import capabilities_for
from rojos.selftest.exchange import Limits
from rojos.selftest.results import profile_table
from rojos.selftest.runner import rojo_selftest_run
from tests.support.agent_run import API_KEY, rojo_for, run_turn, valid_history
from tests.support.fake_provider import (
    Gate,
    chunk,
    http_error,
    stream,
    text_chunks,
    tool_call_chunks,
)
from tests.support.provider_profiles import use_profile

pytestmark = pytest.mark.django_db(transaction=True)

W, N, U = "works", "does_not", "unknown"
ORDER = ("stream", "tool_call", "parallel_calls", "usage", "reasoning", "images", "listing")
# Each provider's expected table: the statuses in ORDER, then the options it refused.
EXPECTED = {
    "openai": ((W, W, W, W, N, W, N), ["parallel_tool_calls"]),
    "anthropic": ((W, W, W, W, N, W, N), []),
    "gemini": ((W, W, W, W, N, W, N), []),
    "mistral": ((W, W, W, W, W, N, N), ["stream_options"]),
    "ollama": ((W, W, W, W, W, N, W), []),
    "lmstudio": ((W, W, W, W, W, W, W), []),
    "vllm": ((W, W, W, W, W, N, W), []),
    "vllm-think-in-prompt": ((W, W, W, W, W, N, W), []),
    "llamacpp": ((W, W, W, W, W, N, W), []),
    "llamacpp-single": ((W, W, N, W, W, N, W), []),
}
REASONING = {
    "mistral": "thinking parts",
    "ollama": "reasoning",
    "lmstudio": "reasoning_content",
    "vllm": "reasoning_content",
    "vllm-think-in-prompt": "closing think tag",
    "llamacpp": "think tags",
    "llamacpp-single": "think tags",
}


@pytest.fixture(autouse=True)
def _forget_windows():
    window_discovery_forget()


@pytest.mark.parametrize("shape", sorted(EXPECTED))
async def test_the_self_test_gives_each_providers_table(fake_provider, shape):
    """Each recorded provider shape gives its table, stored as the model's profile."""
    profile_of = use_profile(fake_provider, shape)
    rojo = await rojo_for(fake_provider)

    profile = await rojo_selftest_run(rojo=rojo)

    statuses, refused = EXPECTED[shape]
    found = {r.capability: r for r in profile.results}
    assert tuple(found[name].status for name in ORDER) == statuses, profile_table(profile)
    assert found["options"].status == W and found["options"].detail["refused"] == refused
    assert profile.requests <= Limits().requests
    stored = await Rojo.objects.aget(pk=rojo.pk)
    assert set(stored.capability_profiles) == {"fake-model"}
    found_caps = capabilities_for(stored)
    assert found_caps.reasoning == REASONING.get(shape)
    assert found_caps.window == (profile_of.window.tokens if profile_of.window else None)
    assert stored.listed_window == found_caps.window
    assert stored.stream_usage_refused is ("stream_options" in refused)
    # The key went only where the rojo points, in the Authorization header, nowhere in a body.
    assert all(h.get("authorization") == f"Bearer {API_KEY}" for h in fake_provider.headers)
    assert API_KEY not in repr(fake_provider.requests) + profile_table(profile)
    # Nor is the provider told of the server's platform, in a request or the model list.
    sent = fake_provider.headers + fake_provider.listing_headers
    assert fake_provider.listing_headers
    assert not [name for h in sent for name in h if name.lower().startswith("x-stainless")]


async def test_a_provider_without_parallel_calls_gets_none_asked(fake_provider, project, users):
    """After the self-test found one call at a time, turns ask for no parallel calls
    (`parallel_tool_calls: false`); where they came only when asked (llama.cpp), turns ask
    for them; a provider that makes them unasked (vLLM) is told nothing about them."""
    sent = {}
    for shape in ("llamacpp-single", "llamacpp", "vllm"):
        fake_provider.reset()
        use_profile(fake_provider, shape)
        rojo = await rojo_for(fake_provider, slug=shape, name=shape)
        await rojo_selftest_run(rojo=rojo)
        fake_provider.reset()
        fake_provider.add(
            stream(tool_call_chunks([("list_files", {"path": ""})])), stream(text_chunks("Done."))
        )
        stored = await Rojo.objects.aget(pk=rojo.pk)

        run = await run_turn(project=project, rojo=stored, user=users["editor"])

        assert run.error is None
        sent[shape] = [r.get("parallel_tool_calls", "absent") for r in fake_provider.requests]
    assert sent == {
        "llamacpp-single": [False, False],
        "llamacpp": [True, True],
        "vllm": ["absent", "absent"],
    }


async def test_a_refused_option_is_not_asked_for_even_where_parallel_calls_fail(
    fake_provider, project, users
):
    """A model whose calls come one at a time on a provider that refuses
    `parallel_tool_calls` is not sent the option it refuses."""
    profile = {
        "taken": "2026-12-05T10:00:00+00:00",
        "results": {
            "parallel_calls": {"status": N, "reason": "one call at a time", "detail": {}},
            "options": {"status": W, "reason": "", "detail": {"refused": ["parallel_tool_calls"]}},
        },
    }
    rojo = await rojo_for(fake_provider, capability_profiles={"fake-model": profile})
    fake_provider.add(
        stream(tool_call_chunks([("list_files", {"path": ""})])), stream(text_chunks("Done."))
    )

    await run_turn(project=project, rojo=rojo, user=users["editor"])

    assert ["parallel_tool_calls" in r for r in fake_provider.requests] == [False, False]


async def test_thinking_opened_in_the_prompt_is_split_from_the_answer_once_tested(
    fake_provider, project, users
):
    """A model whose template opens its thinking in the prompt streams the thinking, then
    `</think>`, then the answer. Untested, that is all answer, as written; once the
    self-test has found the shape, its turns keep the thinking apart."""
    use_profile(fake_provider, "vllm-think-in-prompt")
    rojo = await rojo_for(fake_provider)
    before = await run_turn(project=project, rojo=rojo, user=users["editor"])
    assert before.text == "17 and 25 make 42.</think>\n\n42"

    await rojo_selftest_run(rojo=rojo)
    rojo = await Rojo.objects.aget(pk=rojo.pk)
    run = await run_turn(project=project, rojo=rojo, user=users["editor"])

    assert run.error is None and run.text == "42"
    assert "".join(e.text for e in run.events if type(e).__name__ == "ReasoningEvent") == (
        "17 and 25 make 42."
    )
    stored = (await valid_history(run.conversation))[-1]
    assert (stored.content, stored.reasoning) == ("42", "17 and 25 make 42.")


async def test_a_profile_is_kept_per_model_and_an_untested_model_keeps_todays_behaviour(
    fake_provider,
):
    """Testing another model keeps the first model's profile, and leaves the rojo's own
    learned fields alone; a model never tested reads as unknown."""
    use_profile(fake_provider, "llamacpp-single")
    rojo = await rojo_for(fake_provider)
    await rojo_selftest_run(rojo=rojo)
    await rojo_selftest_run(rojo=rojo, model="other-model")

    stored = await Rojo.objects.aget(pk=rojo.pk)
    assert set(stored.capability_profiles) == {"fake-model", "other-model"}
    assert capabilities_for(stored).parallel_calls is False
    assert capabilities_for(stored, "never-tested").parallel_calls is None
    assert {r["model"] for r in fake_provider.requests} == {"fake-model", "other-model"}


async def test_the_self_test_stops_at_its_limits(fake_provider):
    """A test given room for two requests makes two, and says what it could not tell."""
    use_profile(fake_provider, "vllm")
    rojo = await rojo_for(fake_provider)

    profile = await rojo_selftest_run(rojo=rojo, limits=Limits(requests=2))

    assert len(fake_provider.requests) == 2 and profile.requests == 2
    found = {r.capability: r.status for r in profile.results}
    assert found["tool_call"] == found["parallel_calls"] == found["images"] == U


async def test_an_answer_past_the_limit_is_cut_off_and_unknown(fake_provider):
    """A provider that goes on and on is read no further than the test's limit."""
    rojo = await rojo_for(fake_provider)
    fake_provider.responder = lambda body: stream(text_chunks("word " * 2000, pieces=400))

    profile = await rojo_selftest_run(rojo=rojo, limits=Limits(answer_chars=100))

    found = {r.capability: r for r in profile.results}
    assert found["stream"].status == U and "cut off" in found["stream"].reason


async def test_reasoning_seen_in_an_answer_cut_at_the_limit_still_counts(fake_provider):
    """A model that thinks past the limit: its answer is unknown, its reasoning's shape known."""
    rojo = await rojo_for(fake_provider)
    thinking = [chunk({"role": "assistant"})] + [chunk({"reasoning_content": "hmm "})] * 60
    fake_provider.responder = lambda body: stream(thinking, text_chunks("42"))

    profile = await rojo_selftest_run(rojo=rojo, limits=Limits(chunks=20))

    found = {r.capability: r for r in profile.results}
    assert found["stream"].status == U and "cut off" in found["stream"].reason
    assert (found["reasoning"].status, found["reasoning"].detail) == (
        W,
        {"shape": "reasoning_content"},
    )


async def test_an_error_after_the_finish_reason_leaves_the_answer_standing_as_in_a_chat(
    fake_provider,
):
    """An error object after a finished response's finish reason (where its usage chunk
    would come): a chat keeps the response whole, so the self-test counts the answer too,
    and notes the late error beside it."""
    rojo = await rojo_for(fake_provider)
    late = {"error": {"message": "Usage accounting is unavailable.", "code": 500}}
    fake_provider.responder = lambda body: stream(text_chunks("42"), late)

    profile = await rojo_selftest_run(rojo=rojo)

    found = {r.capability: r for r in profile.results}
    assert found["stream"].status == W
    assert "answered '42'" in found["stream"].reason
    assert "after its finish reason" in found["stream"].reason
    assert "Usage accounting is unavailable." in found["stream"].reason
    assert found["images"].status == W


@pytest.fixture
def kept_open(fake_provider, settings):
    """The fake provider answers "42" with its finish reason, then sends nothing more and
    keeps the connection open (no usage chunk, no [DONE], no end) until the test is over.
    The chat's stall timeout is longer than the test's limits, so they come first."""
    settings.ROJO_PROVIDER_TIMEOUT = 60
    never = threading.Event()
    fake_provider.responder = lambda body: stream(text_chunks("42"), Gate(never, timeout=30))
    yield
    never.set()


@pytest.mark.usefixtures("kept_open")
async def test_a_provider_that_hangs_after_the_finish_reason_passes_as_in_a_chat(fake_provider):
    """The answer finished (its finish reason came), then the provider kept the connection
    open: a chat keeps that answer once ROJO_PROVIDER_TIMEOUT passes
    (test_a_connection_lost_after_the_finish_reason_loses_nothing), so the self-test counts
    it too, with a note that the connection stayed open, not as a timeout."""
    rojo = await rojo_for(fake_provider)

    profile = await rojo_selftest_run(rojo=rojo, limits=Limits(seconds_each=1))

    found = {r.capability: r for r in profile.results}
    assert found["stream"].status == W, profile_table(profile)
    assert "answered '42'" in found["stream"].reason
    assert "kept the connection open after its response finished" in found["stream"].reason
    assert "No whole answer" not in profile_table(profile)
    assert found["images"].status == W


@pytest.mark.usefixtures("kept_open")
async def test_a_provider_that_hangs_after_every_finish_is_tested_within_the_total(
    fake_provider,
):
    """Past a finish reason only the usage chunk and [DONE] are to come: the self-test waits
    for them `seconds_after_finish`, not a request's whole `seconds_each`, so a provider that
    hangs after every answer still gets every probe asked within the test's total."""
    rojo = await rojo_for(fake_provider)
    limits = Limits(seconds_each=30, seconds_total=20, seconds_after_finish=0.2)

    profile = await rojo_selftest_run(rojo=rojo, limits=limits)

    found = {r.capability: r for r in profile.results}
    assert (found["stream"].status, found["images"].status) == (W, W), profile_table(profile)
    assert "limits were reached" not in profile_table(profile)


async def test_a_provider_that_echoes_the_key_never_gets_it_into_the_table(fake_provider):
    """Refusals are shown in the provider's words, with the key scrubbed out of them."""
    rojo = await rojo_for(fake_provider)
    refusal = {"error": {"message": f"Incorrect request for key {API_KEY}", "type": "x"}}
    fake_provider.responder = lambda body: http_error(400, refusal)

    profile = await rojo_selftest_run(rojo=rojo)

    stored = await Rojo.objects.aget(pk=rojo.pk)
    found = {r.capability: r.status for r in profile.results}
    refused = ("stream", "tool_call", "parallel_calls", "images", "options")
    assert {found[name] for name in refused} == {N}
    assert "Incorrect request for key ***" in profile_table(profile)
    assert API_KEY[3:] not in profile_table(profile) + repr(stored.capability_profiles)


async def test_a_rojo_whose_key_variable_is_refused_sends_nothing(fake_provider):
    """The key rule holds for the self-test as for a turn: nothing is sent."""
    rojo = await rojo_for(fake_provider, api_key="", api_key_env="DATABASE_URL")

    with pytest.raises(RojoKeyRefused):
        await rojo_selftest_run(rojo=rojo)

    assert fake_provider.requests == [] and fake_provider.listing_requests == []


async def test_a_refused_reasoning_effort_is_found_and_left_out(fake_provider):
    """A rojo's reasoning effort goes with the test's requests as with its turns; a provider
    that refuses it (Mistral's 422 to an unknown field) is found out, and the rest of the
    test goes on without it."""
    use_profile(fake_provider, "vllm")
    rojo = await rojo_for(fake_provider)
    rojo.reasoning_effort = "high"  # the rojo's setting where the model has it (#36 part 2)
    detail = [{"type": "extra_forbidden", "loc": ["body", "reasoning_effort"], "msg": "Extra"}]
    fake_provider.add(http_error(422, {"detail": detail}))

    profile = await rojo_selftest_run(rojo=rojo)

    found = {r.capability: r for r in profile.results}
    assert found["options"].detail == {"refused": ["reasoning_effort"]}
    assert [r.get("reasoning_effort") for r in fake_provider.requests[:2]] == ["high", None]
    assert not any("reasoning_effort" in r for r in fake_provider.requests[1:])
