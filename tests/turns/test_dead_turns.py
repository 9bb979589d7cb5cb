"""Dead turns are found within seconds: a server process SIGKILLed mid-reply, followed through
another process; a process restarted on the same host. Everyone is told, nothing stays locked,
and the reply the kill cut off is counted against the budgets.

Real processes on the test's database (SQLite or PostgreSQL; with REDIS_URL the follower
also gets the reply relayed until the kill).
"""

import math
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from rojos.context.window import DEFAULT_CHARS_PER_TOKEN
from rojos.models import Conversation, TurnRecord, UsageRecord
from rojos.turns.repair import INTERRUPTED_MESSAGE
from tests.support.fake_provider import Gate, stream, text_chunks
from tests.support.helpers import assert_history_valid, make_rojo, stored_history
from tests.support.live_server import parse_sse, read_until, wait_until

pytestmark = pytest.mark.django_db(transaction=True)

SLOW_REPLY = "w " * 400


@pytest.fixture
def rojo(fake_provider):
    return make_rojo(fake_provider.base_url)


def doomed(server_process):
    return server_process(ROJO_PROVIDER_RETRIES="0", ROJO_DRAFT_SECONDS="0.2")


def start_slow_turn(client, project, rojo, fake_provider, killed: threading.Event):
    """A reply streaming on `client`'s process that holds after 100 of its 400 pieces until
    `killed` is set, so that it still runs when the test kills the process however slowly
    the test gets there; returns its open response and its first events (START and a few
    CHAT)."""
    chunks = text_chunks(SLOW_REPLY, pieces=400)
    chunks.insert(100, Gate(killed))
    fake_provider.add(stream(*chunks, delay=0.05))
    response_cm = client.chat_stream(project.pk, rojo=rojo.slug, message="Talk")
    response = response_cm.__enter__()
    events = parse_sse(response.iter_lines())
    return response_cm, read_until(events, "CHAT", count=8)


def test_a_killed_turn_followed_elsewhere_ends_with_an_error_and_the_next_message_is_taken(
    server_process, client_for, users, project, rojo, fake_provider, settings
):
    """SIGKILL of the process running a reply, while a re-attach follows it through the other
    process: the follower gets ERROR `interrupted` (what was written is kept) and DONE once the
    process is found gone, not once its claim is stale, and a new message is accepted."""
    settings.ROJO_TURN_STALE_SECONDS = 3600  # the survivor finds the process gone, not stale
    victim = doomed(server_process)
    on_victim = client_for(users["editor"], base_url=victim.base_url)
    on_survivor = client_for(users["editor"])
    killed = threading.Event()
    response_cm, seen = start_slow_turn(on_victim, project, rojo, fake_provider, killed)
    conversation = seen[0].data["conversation"]

    def drafted() -> bool:  # a draft of the text is saved (drafts come every 0.2 s)
        history = stored_history(conversation)
        return len(history) > 1 and len(history[1].content) >= 16

    wait_until(drafted, timeout=60)

    with on_survivor.http.stream(
        "GET",
        f"/api/conversations/{conversation}/stream",
        headers={"Last-Event-ID": str(seen[-1].id)},
        timeout=30,
    ) as follow:
        followed = parse_sse(follow.iter_lines())
        victim.kill()
        killed.set()
        rest = list(followed)
    response_cm.__exit__(None, None, None)

    assert [e.type for e in rest][-2:] == ["ERROR", "DONE"]
    assert rest[-2].data == {"message": INTERRUPTED_MESSAGE, "code": "interrupted"}
    ids = [e.id for e in rest]
    assert ids == list(range(seen[-1].id + 1, seen[-1].id + 1 + len(rest)))
    # What it had written is kept as the reply, no longer a draft: search finds it.
    kept = stored_history(conversation)[1]
    assert (kept.role, kept.draft) == ("assistant", False)
    hits = on_survivor.get("/api/search", params={"q": "w"}).json()
    assert [hit["message"] for hit in hits] == [kept.pk]

    fake_provider.add(stream(*text_chunks("Back.")))
    again = on_survivor.chat(project.pk, rojo=rojo.slug, message="Again", conversation=conversation)
    assert [e.type for e in again] == ["START", "CHAT", "DONE"]
    history = stored_history(conversation)
    assert_history_valid(history)
    assert [m.role for m in history] == ["user", "assistant", "user", "assistant"]
    assert SLOW_REPLY.startswith(history[1].content) and len(history[1].content) >= 16
    killed = TurnRecord.objects.filter(conversation_id=conversation).order_by("started").first()
    assert (killed.status, killed.error_code) == ("interrupted", "interrupted")


def test_a_restarted_process_ends_the_turns_of_its_earlier_life_at_once(
    server_process, client_for, users, project, rojo, fake_provider, settings
):
    """A process killed mid-reply and a new one started on the same host: the new one ends
    the dead turn at start-up, with no request about it, long before its claim goes stale."""
    settings.ROJO_TURN_STALE_SECONDS = 3600  # nor does this process end it, as stale
    victim = doomed(server_process)
    on_victim = client_for(users["editor"], base_url=victim.base_url)
    killed = threading.Event()
    response_cm, seen = start_slow_turn(on_victim, project, rojo, fake_provider, killed)
    conversation = seen[0].data["conversation"]
    victim.kill()
    killed.set()
    response_cm.__exit__(None, None, None)

    server_process(ROJO_TURN_STALE_SECONDS="300")

    def ended() -> bool:
        record = TurnRecord.objects.get(conversation_id=conversation)
        return record.status == TurnRecord.Status.INTERRUPTED

    wait_until(ended, timeout=60)  # its claim goes stale after 300 s
    claim = Conversation.objects.get(pk=conversation)
    assert (claim.turn_id, claim.turn_owner) == (None, "")
    assert TurnRecord.objects.get(conversation_id=conversation).error == INTERRUPTED_MESSAGE


def test_stop_on_a_turn_whose_process_is_gone_ends_it_at_once(
    server_process, client_for, users, project, rojo, fake_provider, settings
):
    """Stop through the surviving process, right after the kill: the turn is ended there and
    then, and the conversation reads as not running, its turn interrupted."""
    settings.ROJO_TURN_STALE_SECONDS = 3600  # ended as gone, not once stale
    victim = doomed(server_process)
    on_victim = client_for(users["editor"], base_url=victim.base_url)
    on_survivor = client_for(users["editor"])
    killed = threading.Event()
    response_cm, seen = start_slow_turn(on_victim, project, rojo, fake_provider, killed)
    conversation = seen[0].data["conversation"]
    victim.kill()
    killed.set()
    response_cm.__exit__(None, None, None)

    stopped = on_survivor.post(f"/api/conversations/{conversation}/stop")

    assert stopped.json() == {"stopping": True}
    detail = on_survivor.get(f"/api/conversations/{conversation}").json()
    assert detail["running"] is False
    assert detail["turns"][0]["status"] == "interrupted"
    assert detail["events"][-2:] == [
        {"type": "ERROR", "data": {"message": INTERRUPTED_MESSAGE, "code": "interrupted"}},
        {"type": "DONE", "data": {}},
    ]


def test_a_reply_killed_as_it_streams_is_counted_once_by_the_processes_that_end_it(
    server_process, client_for, users, project, rojo, fake_provider, settings
):
    """SIGKILL mid-reply, then two processes find its turn dead at the same moment: the
    response the provider billed is recorded once, as an estimate (no usage came) of the
    request it answered and of the text its drafts kept, linked to that text; the turn's
    user's budgets count it."""
    settings.ROJO_TURN_STALE_SECONDS = 3600  # both survivors find the process gone
    victim = doomed(server_process)
    other = server_process(ROJO_TURN_STALE_SECONDS="3600")
    on_victim = client_for(users["editor"], base_url=victim.base_url)
    survivors = [client_for(users["editor"]), client_for(users["editor"], base_url=other.base_url)]
    killed = threading.Event()
    response_cm, seen = start_slow_turn(on_victim, project, rojo, fake_provider, killed)
    conversation = seen[0].data["conversation"]
    wait_until(lambda: len(stored_history(conversation)) > 1, timeout=60)  # a draft is saved
    victim.kill()
    killed.set()
    response_cm.__exit__(None, None, None)

    def read(client) -> dict:
        return client.get(f"/api/conversations/{conversation}").json()

    with ThreadPoolExecutor(2) as pool:
        details = list(pool.map(read, survivors))

    assert [d["running"] for d in details] == [False, False]
    kept = stored_history(conversation)[1]
    assert (kept.role, kept.draft) == ("assistant", False)
    usage = list(UsageRecord.objects.filter(conversation_id=conversation))
    assert len(usage) == 1
    record = usage[0]
    assert (record.message_id, record.user_id, record.kind) == (
        kept.pk,
        users["editor"].pk,
        "reply",
    )
    assert (record.reported, record.model) == (False, rojo.model)
    assert record.completion_tokens == math.ceil(len(kept.content) / DEFAULT_CHARS_PER_TOKEN)
    assert record.prompt_tokens >= math.ceil(
        len(rojo.system_prompt + "Talk") / DEFAULT_CHARS_PER_TOKEN
    )
    reported = survivors[0].get(f"/api/conversations/{conversation}/usage").json()
    assert reported["total"]["completion"] == record.completion_tokens
    assert reported["total"]["estimated"] is True
