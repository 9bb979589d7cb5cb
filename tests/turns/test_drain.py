"""A process's drain (rojos.turns.shutdown) and the starts under way as it begins: the turn
such a start becomes is waited for and, past the grace, ends as interrupted; none runs on
past the drain, cut mid-reply as its process exits."""

import asyncio
import threading

import pytest
from asgiref.sync import sync_to_async

from roject.members.access import aproject_access
from rojos.context.budgets import budget_check
from rojos.models import Conversation, TurnRecord
from rojos.turns import start as starting
from rojos.turns.registry import turn_get, turns_running, turns_starting
from rojos.turns.shutdown import turns_drain
from rojos.web.selectors import rojo_get
from tests.support.fake_provider import Pause, stream, text_chunks
from tests.support.helpers import assert_history_valid, make_rojo, stored_history

pytestmark = pytest.mark.django_db(transaction=True)


async def test_a_start_under_way_as_the_drain_begins_is_waited_for_and_interrupted(
    project, users, fake_provider, monkeypatch
):
    made = await sync_to_async(make_rojo)(fake_provider.base_url)
    rojo = await sync_to_async(rojo_get)(made.pk)
    fake_provider.add(stream(text_chunks("Kept.", finish=None), Pause(30.0),
                             text_chunks(" Never sent.")))  # fmt: skip
    user = users["editor"]
    access = await aproject_access(user=user, project_id=project.pk)
    budgets = await sync_to_async(budget_check)(user=user, project_id=project.pk)
    entered, release = threading.Event(), threading.Event()
    real_begin = starting.turn_begin_blocking

    def slow_begin(**kwargs):  # the start's transaction, while the drain begins
        entered.set()
        release.wait(5)
        return real_begin(**kwargs)

    monkeypatch.setattr(starting, "turn_begin_blocking", slow_begin)
    start = asyncio.ensure_future(
        starting.turn_start(
            access=access, user=user, rojo=rojo, conversation=None, message="Go", budgets=budgets
        )
    )
    await asyncio.to_thread(entered.wait, 5)
    assert turns_running() == [] and len(turns_starting()) == 1

    drain = asyncio.ensure_future(turns_drain(grace=0.5))
    await asyncio.sleep(0.1)
    release.set()
    turn = await start
    await asyncio.wait_for(drain, timeout=30)

    assert turn.finished and turns_running() == [] and turns_starting() == []
    conversation = await Conversation.objects.aget()
    assert turn_get(conversation.pk) is turn
    assert not conversation.running
    assert (await TurnRecord.objects.aget()).status == TurnRecord.Status.INTERRUPTED
    history = await sync_to_async(stored_history)(conversation.pk)
    assert_history_valid(history)
    assert history[-1].content == "Kept." and not history[-1].draft
