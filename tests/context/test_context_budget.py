"""The context budget per rojo: declared (admin, API, command) or learned from the provider
where it lists it, else 32,768; learning never holds a turn up for long."""

import asyncio

import pytest
from asgiref.sync import sync_to_async
from django.urls import reverse

from rojos.context.discovery import window_learn
from rojos.context.model_choice import model_default
from rojos.context.window import DEFAULT_WINDOW, prompt_budget, window_of
from rojos.models import Rojo
from tests.support.agent_run import rojo_for, run_turn
from tests.support.fake_provider import Window, stream, text_chunks
from tests.support.helpers import command_error, make_rojo, run
from tests.web.test_admin import change_url, rojo_form

LISTINGS = ["vllm", "llamacpp", "ollama", "lmstudio", "openrouter"]


@pytest.mark.django_db
def test_create_rojo_stores_its_context_window_and_output_reserve():
    run(
        "create_rojo",
        name="Small",
        base_url="http://127.0.0.1:8080/v1",
        model="m",
        context_window=12_000,
        max_output_tokens=2_000,
    )

    rojo = Rojo.objects.get(slug="small")
    assert (rojo.context_window, rojo.max_output_tokens) == (12_000, 2_000)
    assert window_of(rojo) == 12_000 and prompt_budget(rojo) == 12_000 - 2_000 - 600


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"context_window": 100}, "context_window: Ensure this value is greater than or equal"),
        (
            {"context_window": 8_000, "max_output_tokens": 6_000},
            "max_output_tokens: must be less than half of the context window",
        ),
    ],
    ids=["tiny-window", "reserve-too-big"],
)
def test_create_rojo_refuses_a_window_that_cannot_work(options, expected):
    base = {"name": "Bad", "base_url": "http://127.0.0.1:8080/v1", "model": "m"}
    assert expected in command_error("create_rojo", **base, **options)
    assert not Rojo.objects.exists()


@pytest.mark.django_db
def test_the_api_lists_each_rojos_window_declared_and_in_use(client, users):
    make_rojo("http://127.0.0.1:9/v1", slug="declared", context_window=12_000)
    make_rojo("http://127.0.0.1:9/v1", slug="learned", listed_window=65_536)
    make_rojo("http://127.0.0.1:9/v1", slug="unknown", refused_window=20_000)
    client.force_login(users["viewer"])

    rojos = {r["slug"]: r for r in client.get("/api/rojos").json()}

    assert {slug: (r["context_window"], r["window"]) for slug, r in rojos.items()} == {
        "declared": (12_000, 12_000),
        "learned": (None, 65_536),
        "unknown": (None, 20_000),
    }
    assert all("api_key" not in r for r in rojos.values())


@pytest.mark.django_db
def test_the_admin_sets_the_window_and_a_new_one_forgets_what_the_old_model_refused(
    admin_client,
):
    rojo = make_rojo("https://api.example.com/v1", slug="admin-rojo", refused_window=9_000)

    page = admin_client.get(change_url(rojo)).content.decode().lower()
    response = admin_client.post(
        change_url(rojo),
        rojo_form(context_window="128000", max_output_tokens="8000", price_input="0.4"),
    )

    assert "window in use" in page and "9,000 tokens" in page
    assert response.status_code == 302
    rojo.refresh_from_db()
    assert (rojo.context_window, rojo.max_output_tokens, rojo.refused_window) == (
        128_000,
        8_000,
        None,
    )
    assert window_of(rojo) == 128_000
    assert admin_client.get(reverse("admin:rojos_rojo_changelist")).status_code == 200


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("listed_by", LISTINGS)
async def test_the_window_is_learned_where_the_provider_lists_it_and_kept(
    fake_provider, project, users, listed_by
):
    """vLLM's max_model_len, llama.cpp's n_ctx, Ollama's num_ctx, LM Studio's and
    OpenRouter's listings: the first turn learns it and stores it on the rojo; later turns
    do not ask again."""
    fake_provider.window = Window(tokens=12_000, listed_by=listed_by)
    fake_provider.add(stream(text_chunks("One.")), stream(text_chunks("Two.")))
    rojo = await rojo_for(fake_provider)

    first = await run_turn(project=project, rojo=rojo, user=users["editor"])
    asked = list(fake_provider.listing_requests)
    stored = await Rojo.objects.aget(pk=rojo.pk)
    second = await run_turn(project=project, rojo=stored, user=users["editor"])

    assert (first.text, second.text) == ("One.", "Two.")
    assert stored.listed_window == 12_000 and window_of(stored) == 12_000
    assert asked and fake_provider.listing_requests == asked


@pytest.mark.django_db(transaction=True)
async def test_a_provider_that_lists_nothing_leaves_the_default_and_is_not_asked_each_turn(
    fake_provider, project, users
):
    fake_provider.add(stream(text_chunks("One.")), stream(text_chunks("Two.")))
    rojo = await rojo_for(fake_provider)

    await run_turn(project=project, rojo=rojo, user=users["editor"])
    asked = len(fake_provider.listing_requests)
    await run_turn(project=project, rojo=rojo, user=users["editor"])

    stored = await Rojo.objects.aget(pk=rojo.pk)
    assert stored.listed_window is None and window_of(stored) == DEFAULT_WINDOW
    assert asked == 4 and len(fake_provider.listing_requests) == asked


@pytest.mark.django_db(transaction=True)
async def test_a_burst_of_first_turns_asks_the_provider_for_its_window_once(fake_provider):
    """Twenty turns starting at once on a rojo not asked yet (a fresh process) share
    one probe: before, each made its own client and asked four times."""
    fake_provider.window = Window(tokens=12_000, listed_by="vllm")
    rojo = await rojo_for(fake_provider)
    copies = [await Rojo.objects.aget(pk=rojo.pk) for _ in range(20)]

    await asyncio.gather(*(window_learn(model_default(copy)) for copy in copies))

    assert len(fake_provider.listing_requests) == 4
    assert {copy.listed_window for copy in copies} == {12_000}
    assert (await Rojo.objects.aget(pk=rojo.pk)).listed_window == 12_000


@pytest.mark.django_db(transaction=True)
async def test_a_declared_window_is_never_asked_for(fake_provider, project, users):
    fake_provider.window = Window(tokens=12_000, listed_by="vllm")
    fake_provider.add(stream(text_chunks("One.")))
    rojo = await rojo_for(fake_provider, context_window=16_000)

    await run_turn(project=project, rojo=rojo, user=users["editor"])

    assert fake_provider.listing_requests == []
    assert (await Rojo.objects.aget(pk=rojo.pk)).listed_window is None


@pytest.mark.django_db(transaction=True)
async def test_a_provider_slow_to_list_its_window_holds_the_turn_only_briefly(
    fake_provider, project, users, settings
):
    settings.ROJO_WINDOW_PROBE_SECONDS = 0.3
    fake_provider.listing_delay = 30  # a turn that waited for it would learn the window
    fake_provider.window = Window(tokens=12_000, listed_by="vllm")
    fake_provider.add(stream(text_chunks("Still here.")))
    rojo = await rojo_for(fake_provider)

    run_ = await run_turn(project=project, rojo=rojo, user=users["editor"])

    assert run_.text == "Still here."
    assert fake_provider.listing_requests  # asked, and not waited for
    stored = await sync_to_async(Rojo.objects.get)(pk=rojo.pk)
    assert stored.listed_window is None and window_of(stored) == DEFAULT_WINDOW
