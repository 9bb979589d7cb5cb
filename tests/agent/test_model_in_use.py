"""A turn asks the model it is given, and what it learns of that model (a refused option,
a stated window, the characters per token) is kept with that model, not the rojo's default."""

import pytest
from asgiref.sync import sync_to_async

from rojos.context.model_choice import model_in_use_blocking
from rojos.models import Message, ModelOption, Rojo
from tests.support.agent_run import rojo_for, run_turn
from tests.support.fake_provider import MODEL, Window, stream, text_chunks

pytestmark = pytest.mark.django_db(transaction=True)

SMALL = "small-model"


async def small_of(rojo: Rojo):
    await ModelOption.objects.acreate(rojo=rojo, name=SMALL)
    return await sync_to_async(model_in_use_blocking)(rojo, SMALL)


async def test_a_refused_option_is_learned_for_the_model_that_refused_it(
    fake_provider, project, users
):
    """SMALL's provider refuses stream_options: asked again without, SMALL remembers; the
    rojo's default model still asks for usage in the stream."""
    fake_provider.refuse_stream_options = "openai"
    fake_provider.add(stream(text_chunks("Small.")))
    rojo = await rojo_for(fake_provider)
    small = await small_of(rojo)

    run = await run_turn(project=project, rojo=rojo, user=users["editor"], model=small)
    fake_provider.refuse_stream_options = None
    fake_provider.add(stream(text_chunks("Default.")))
    stored = await Rojo.objects.aget(pk=rojo.pk)
    await run_turn(project=project, rojo=stored, user=users["editor"])

    assert (run.error, run.text) == (None, "Small.")
    assert fake_provider.models_asked == [SMALL, SMALL, MODEL]
    assert ["stream_options" in r for r in fake_provider.requests] == [True, False, True]
    assert (await ModelOption.objects.aget(name=SMALL)).stream_usage_refused is True
    assert stored.stream_usage_refused is False
    reply = await Message.objects.aget(conversation=run.conversation, role="assistant")
    assert reply.model == SMALL


async def test_a_window_stated_in_a_refusal_caps_only_the_model_that_stated_it(
    fake_provider, project, users
):
    fake_provider.window = Window(tokens=2_000)
    rojo = await rojo_for(fake_provider)
    small = await small_of(rojo)

    run = await run_turn(
        project=project, rojo=rojo, user=users["editor"], model=small, message="word " * 3_000
    )

    assert run.error is not None and run.error.code == "context_overflow"
    assert set(fake_provider.models_asked) == {SMALL}
    assert (await ModelOption.objects.aget(name=SMALL)).refused_window == 2_000
    assert (await Rojo.objects.aget(pk=rojo.pk)).refused_window is None
