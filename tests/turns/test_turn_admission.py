"""Turn starts admitted a few at a time, in order: a start gives its place back once its
provider request leaves, once it is refused, or once it has held it too long."""

import asyncio
import contextlib
import functools
import sys
import threading

import pytest

from rojos.models import Conversation, McpServer, RojoMcpServer, UsageRecord
from rojos.turns.admission import StartSlot, start_admit
from tests.support.fake_provider import Gate, stream, text_chunks, usage_chunk
from tests.support.helpers import make_rojo, stored_history
from tests.support.live_server import parse_sse, read_until

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def one_at_a_time(settings):
    settings.ROJO_START_CONCURRENCY = 1
    settings.ROJO_START_HOLD_SECONDS = 60  # long enough that only the start itself frees it
    return settings


def _chat(client, project_id, rojo_id, message, results, index):
    events = client.chat(project_id, rojo=rojo_id, message=message)
    results[index] = events


def test_a_start_gives_its_place_back_when_its_request_leaves_not_at_the_first_byte(
    one_at_a_time, client_for, users, project, fake_provider
):
    """Three starts with room for one: the provider answers none until all three asked.
    A place held until the provider's first byte would leave the second waiting forever."""
    rojo = make_rojo(fake_provider.base_url)
    together = threading.Barrier(3)
    for word in ("one", "two", "three"):
        fake_provider.add(stream(*text_chunks(f"Reply {word}."), together=together))
    client = client_for(users["editor"])
    results: list = [None] * 3
    threads = [
        threading.Thread(target=_chat, args=(client, project.pk, rojo.pk, f"m{i}", results, i))
        for i in range(3)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)

    assert not together.broken
    texts = sorted("".join(e.data.get("text", "") for e in events) for events in results)
    assert texts == ["Reply one.", "Reply three.", "Reply two."]
    assert all(events[-1].type == "DONE" for events in results)
    assert not any(e.type == "ERROR" for events in results for e in events)


def _places_given_back(monkeypatch, record) -> None:
    """Call `record(slot)` as each place is given back (once per place)."""
    release = StartSlot.release

    def recorded_release(slot):
        if not slot.released:
            record(slot)
        release(slot)

    monkeypatch.setattr(StartSlot, "release", recorded_release)


def _one_place_held_by_a_stuck_start(settings, fake_provider):
    """Room for one start, held for 3 s at a time; a rojo whose start is stuck before its
    provider request (its MCP server never answers, for the whole test), and a plain one."""
    settings.ROJO_START_CONCURRENCY = 1
    settings.ROJO_START_HOLD_SECONDS = 3
    settings.ROJO_MCP_START_TIMEOUT = 60
    stuck = make_rojo(fake_provider.base_url, slug="stuck", name="Stuck")
    silent = McpServer.objects.create(
        name="Silent", slug="silent", transport="stdio", command=sys.executable,
        args=["-c", "import time; time.sleep(120)"],
    )  # fmt: skip
    RojoMcpServer.objects.create(rojo=stuck, server=silent)
    return stuck, make_rojo(fake_provider.base_url, slug="plain", name="Plain")


def test_a_chat_waits_behind_a_start_stuck_before_its_request_until_that_ones_hold_ends(
    settings, client_for, users, project, fake_provider, monkeypatch
):
    """Room for one start; the first is stuck before its provider request (its MCP server
    never answers): the next chat's reply waits for the first's place, given back when its
    hold ends, not before."""
    stuck, plain = _one_place_held_by_a_stuck_start(settings, fake_provider)
    happened: list[str] = []
    _places_given_back(monkeypatch, lambda _: happened.append("place given back"))

    def quick(body):
        happened.append("provider asked")
        return stream(*text_chunks("Quick."))

    fake_provider.add(quick)
    client = client_for(users["editor"])

    with client.chat_stream(project.pk, rojo=stuck.slug, message="Use the tools") as first:
        read_until(parse_sse(first.iter_lines()), "START")  # its place is taken: MCP starts
        happened.append("next chat sent")
        events = client.chat(project.pk, rojo=plain.slug, message="Hi")
        # The first is still stuck (the test's end stops it): its request was never sent.
        assert len(fake_provider.requests) == 1

    assert "".join(e.data.get("text", "") for e in events) == "Quick."
    # The first's place came back before the next chat reached its provider: by its hold,
    # since the first had neither sent its request nor ended.
    after = happened[happened.index("next chat sent") :]
    assert after[:2] == ["next chat sent", "place given back"] and "provider asked" in after


def test_a_chats_session_is_read_once_it_has_its_place_not_while_it_waits(
    settings, client_for, users, project, fake_provider, monkeypatch
):
    """The place is taken before Django's request path (rojos.web.chat_admission): a chat
    waiting for one has not had its session and user read yet, so under a burst the first
    admitted starts do not wait for every other chat's checks. Room for one start, held by
    a first chat stuck before its provider request until its hold ends."""
    from roject.identity.sessions import SessionStore

    stuck, plain = _one_place_held_by_a_stuck_start(settings, fake_provider)
    fake_provider.add(stream(*text_chunks("Quick.")))
    happened: list[str] = []
    load = SessionStore.load
    _places_given_back(monkeypatch, lambda _: happened.append("place given back"))

    def recorded_load(store):
        happened.append("session read")
        return load(store)

    monkeypatch.setattr(SessionStore, "load", recorded_load)
    client = client_for(users["editor"])

    with client.chat_stream(project.pk, rojo=stuck.slug, message="Use the tools") as first:
        read_until(parse_sse(first.iter_lines()), "START")
        happened.append("next chat sent")
        events = client.chat(project.pk, rojo=plain.slug, message="Hi")

    assert "".join(e.data.get("text", "") for e in events) == "Quick."
    after = happened[happened.index("next chat sent") :]
    assert after[:3] == ["next chat sent", "place given back", "session read"], after


def test_a_chat_by_no_one_who_may_chat_is_refused_without_waiting_for_a_place(
    settings, client_for, users, project, fake_provider, monkeypatch
):
    """Only what a member has chatted with takes its place before Django's checks: with
    the one place held by a stuck start, a chat with no session, a made-up session or a
    made-up token is refused at once, and never queues ahead of members' starts."""
    stuck, plain = _one_place_held_by_a_stuck_start(settings, fake_provider)
    happened: list[str] = []
    _places_given_back(monkeypatch, lambda _: happened.append("place given back"))
    strangers = [client_for(), client_for(), client_for()]
    strangers[1].http.cookies.set(settings.SESSION_COOKIE_NAME, "made-up-session-key")
    strangers[2].http.headers["Authorization"] = "Bearer rojo_madeup"
    payload = {"rojo": plain.slug, "message": "Hi"}

    with client_for(users["editor"]).chat_stream(
        project.pk, rojo=stuck.slug, message="Use the tools"
    ) as first:
        read_until(parse_sse(first.iter_lines()), "START")  # it holds the only place
        for stranger in strangers:
            answer = stranger.post(f"/api/projects/{project.pk}/chat", json=payload)
            happened.append(f"answered {answer.status_code}")

    assert happened[:3] == ["answered 401", "answered 401", "answered 401"], happened


def test_a_logged_out_members_cookie_is_refused_without_waiting_for_a_place_once_refused(
    settings, client_for, users, project, fake_provider, monkeypatch
):
    """A member's cookie is remembered once it passed a chat's checks; after its logout the
    first chat with it is refused (401) and it is forgotten: a flood sent with it no longer
    queues ahead of members' starts."""
    stuck, plain = _one_place_held_by_a_stuck_start(settings, fake_provider)
    fake_provider.add(stream(*text_chunks("Quick.")))
    editor = client_for(users["editor"])
    payload = {"rojo": plain.slug, "message": "Hi"}
    editor.chat(project.pk, rojo=plain.slug, message="Hi")  # remembered from now on
    cookie = editor.http.cookies[settings.SESSION_COOKIE_NAME]
    assert editor.post("/logout/", follow_redirects=False).status_code == 302
    stolen = client_for()
    stolen.http.cookies.set(settings.SESSION_COOKIE_NAME, cookie)
    assert stolen.post(f"/api/projects/{project.pk}/chat", json=payload).status_code == 401
    happened: list[str] = []
    _places_given_back(monkeypatch, lambda _: happened.append("place given back"))

    with client_for(users["owner"]).chat_stream(
        project.pk, rojo=stuck.slug, message="Use the tools"
    ) as first:
        read_until(parse_sse(first.iter_lines()), "START")  # it holds the only place
        for _ in range(3):
            answer = stolen.post(f"/api/projects/{project.pk}/chat", json=payload)
            happened.append(f"answered {answer.status_code}")

    assert happened[:3] == ["answered 401", "answered 401", "answered 401"], happened


def test_a_chat_sent_while_the_process_drains_is_refused_without_waiting_for_a_place(
    settings, client_for, users, project, fake_provider, monkeypatch
):
    """A process shutting down takes no new turns (roject/server/graceful.py): a chat, a
    known member's too, is answered 503 at once, not after a place it would not use."""
    stuck, plain = _one_place_held_by_a_stuck_start(settings, fake_provider)
    happened: list[str] = []
    _places_given_back(monkeypatch, lambda _: happened.append("place given back"))
    editor = client_for(users["editor"])

    with editor.chat_stream(project.pk, rojo=stuck.slug, message="Use the tools") as first:
        read_until(parse_sse(first.iter_lines()), "START")  # it holds the only place
        monkeypatch.setattr("roject.server.draining._draining", True)
        for client in (editor, client_for(users["owner"])):  # known, and not yet
            answer = client.post(
                f"/api/projects/{project.pk}/chat", json={"rojo": plain.slug, "message": "Hi"}
            )
            happened.append(f"answered {answer.status_code}")

    assert happened[:2] == ["answered 503", "answered 503"], happened


def test_a_members_first_chat_takes_its_place_after_its_checks(
    settings, client_for, users, project, fake_provider, monkeypatch
):
    """A credential no chat has passed the checks with yet (a member's first chat on this
    process) has them done first, and waits for its place in the view."""
    from roject.identity.sessions import SessionStore

    stuck, plain = _one_place_held_by_a_stuck_start(settings, fake_provider)
    fake_provider.add(stream(*text_chunks("Quick.")))
    happened: list[str] = []
    _places_given_back(monkeypatch, lambda _: happened.append("place given back"))
    load = SessionStore.load
    owner = client_for(users["owner"])

    def recorded_load(store):
        if store.session_key == owner.http.cookies[settings.SESSION_COOKIE_NAME]:
            happened.append("session read")
        return load(store)

    monkeypatch.setattr(SessionStore, "load", recorded_load)
    with client_for(users["editor"]).chat_stream(
        project.pk, rojo=stuck.slug, message="Use the tools"
    ) as first:
        read_until(parse_sse(first.iter_lines()), "START")  # it holds the only place
        events = owner.chat(project.pk, rojo=plain.slug, message="Hi")

    assert "".join(e.data.get("text", "") for e in events) == "Quick."
    assert happened[:2] == ["session read", "place given back"], happened


@pytest.fixture
def reply_beside_a_held_place(settings, client_for, users, project, fake_provider, monkeypatch):
    """`(wait)` -> a context: room for one start, which a stuck rojo's start holds for 3 s;
    a reply's writes wait for the starts at most `wait` seconds (ROJO_END_YIELD_SECONDS). A
    reply of the plain rojo in two parts: once its first is read and the stuck start holds
    the place, its provider sends the rest. Yields the editor's client, what happened (each
    place given back, in order), the reply's events, those read so far and its
    conversation."""
    return functools.partial(
        _reply_beside_a_held_place, settings, fake_provider, monkeypatch,
        client_for(users["editor"]), project,
    )  # fmt: skip


@contextlib.contextmanager
def _reply_beside_a_held_place(settings, fake_provider, monkeypatch, client, project, *, wait):
    stuck, plain = _one_place_held_by_a_stuck_start(settings, fake_provider)
    settings.ROJO_END_YIELD_SECONDS = wait
    happened: list[str] = []
    _places_given_back(monkeypatch, lambda _: happened.append("place given back"))
    opened = threading.Event()
    fake_provider.add(stream(text_chunks("Part one.", finish=None), Gate(opened),
                             text_chunks(" Part two."), usage_chunk(1000, 500)))  # fmt: skip
    with client.chat_stream(project.pk, rojo=plain.slug, message="Hi") as reply:
        events = parse_sse(reply.iter_lines())
        seen = read_until(events, "CHAT")
        with client.chat_stream(project.pk, rojo=stuck.slug, message="Use the tools") as other:
            read_until(parse_sse(other.iter_lines()), "START")  # it holds the only place
            happened.append("place taken")
            opened.set()
            yield client, happened, events, seen, seen[0].data["conversation"]


def _assert_stored_whole(conversation: int) -> None:
    """The reply is stored whole, no longer a draft, and the conversation given up."""
    history = stored_history(conversation)
    assert [(m.role, m.content, m.draft) for m in history] == [
        ("user", "Hi", False), ("assistant", "Part one. Part two.", False),
    ]  # fmt: skip
    assert Conversation.objects.get(pk=conversation).turn_id is None


def _texts(events) -> str:
    return "".join(e.data.get("text", "") for e in events if e.type == "CHAT")


def test_a_replys_writes_wait_for_the_starts_under_way(reply_beside_a_held_place):
    """Under a burst of starts the replies that end meanwhile are stored once the starts
    are through (rojos.turns.admission.starts_settled): their text streams whole at once,
    only their message, usage and end wait, and the CPU goes to the starts first."""
    with reply_beside_a_held_place(wait=60) as (_, happened, events, seen, conversation):
        seen += read_until(events, "CHAT")
        happened.append("text whole")
        seen += list(events)
        happened.append("done")

    assert _texts(seen) == "Part one. Part two." and seen[-1].type == "DONE"
    after = happened[happened.index("place taken") + 1 :]
    assert after == ["text whole", "place given back", "done"], happened
    _assert_stored_whole(conversation)


def test_a_reply_waits_for_the_starts_no_longer_than_its_bound(reply_beside_a_held_place):
    with reply_beside_a_held_place(wait=0.2) as (_, happened, events, seen, _):
        seen += list(events)
        happened.append("done")

    assert _texts(seen) == "Part one. Part two." and seen[-1].type == "DONE"
    # Done before the stuck start's hold (3 s) ended.
    assert happened[happened.index("place taken") + 1 :] == ["done"], happened


def test_a_reply_stopped_while_its_writes_wait_keeps_its_text_and_counts_its_usage(
    reply_beside_a_held_place,
):
    with reply_beside_a_held_place(wait=60) as (client, happened, events, seen, conversation):
        seen += read_until(events, "CHAT")
        stopped = client.post(f"/api/conversations/{conversation}/stop")
        seen += list(events)
        happened.append("done")

    assert stopped.status_code == 200
    assert [e.type for e in seen[-2:]] == ["ERROR", "DONE"] and seen[-2].data["code"] == "stopped"
    assert happened[happened.index("place taken") + 1 :] == ["done"], happened  # as it waited
    _assert_stored_whole(conversation)
    # The response was whole: what the provider reported is counted, as for any reply.
    usage = UsageRecord.objects.get(conversation_id=conversation)
    assert (usage.prompt_tokens, usage.completion_tokens, usage.reported) == (1000, 500, True)
    assert usage.message_id == stored_history(conversation)[-1].pk


def test_a_start_refused_before_its_turn_gives_its_place_back(
    one_at_a_time, client_for, users, project, fake_provider, monkeypatch
):
    given_back: list[StartSlot] = []
    _places_given_back(monkeypatch, given_back.append)
    rojo = make_rojo(fake_provider.base_url)
    fake_provider.add(stream(*text_chunks("Here.")))
    client = client_for(users["editor"])
    refused = client.post(
        f"/api/projects/{project.pk}/chat", json={"rojo": "no-such-rojo", "message": "Hi"}
    )
    assert refused.status_code == 404
    outsider = client_for(users["outsider"]).post(
        f"/api/projects/{project.pk}/chat", json={"rojo": rojo.pk, "message": "Hi"}
    )
    assert outsider.status_code == 404
    anonymous = client_for().post(
        f"/api/projects/{project.pk}/chat", json={"rojo": rojo.pk, "message": "Hi"}
    )
    assert anonymous.status_code in (401, 403)  # refused by Django's path, with no place
    # Each gave its place back as it was answered, not after the hold (60 s).
    assert len(given_back) == 2

    events = client.chat(project.pk, rojo=rojo.pk, message="Hi")
    assert "".join(e.data.get("text", "") for e in events) == "Here."


async def test_a_place_held_too_long_is_given_back(settings):
    settings.ROJO_START_CONCURRENCY = 1
    settings.ROJO_START_HOLD_SECONDS = 1
    held = await start_admit()
    waiting = asyncio.ensure_future(start_admit())
    await asyncio.sleep(0)
    assert not waiting.done()  # the place is held
    nxt = await asyncio.wait_for(waiting, 30)  # nothing but the hold's end gives it back
    assert held.released
    nxt.release()


async def test_waiting_starts_are_admitted_in_the_order_they_came(settings):
    settings.ROJO_START_CONCURRENCY = 2
    settings.ROJO_START_HOLD_SECONDS = 60
    first, second = await start_admit(), await start_admit()
    admitted: list[int] = []

    async def wait(n: int):
        slot = await start_admit()
        admitted.append(n)
        return slot

    waiting = []
    for n in range(5):
        waiting.append(asyncio.create_task(wait(n)))
        await asyncio.sleep(0)  # each is queued before the next
    await asyncio.sleep(0.05)
    assert admitted == []
    first.release()
    first.release()  # a place is given back once, however often it is released
    slots = [await waiting[0]]
    await asyncio.sleep(0.05)
    assert admitted == [0]
    second.release()
    for task in waiting[1:]:
        slots.append(await task)
        slots[-2].release()
    assert admitted == [0, 1, 2, 3, 4]
    slots[-1].release()
