"""The chat endpoint on a live ASGI server: formats, access, one turn at a time, re-attach, stop."""

import json
import threading

import pytest

from rojos.models import Conversation, Message
from tests.support.fake_provider import Gate, http_error, stream, text_chunks, tool_call_chunks
from tests.support.helpers import assert_history_valid, make_rojo, stored_history
from tests.support.live_server import parse_sse, wait_until

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def rojo(fake_provider, settings):
    settings.ROJO_PROVIDER_RETRIES = 0
    return make_rojo(fake_provider.base_url)


def slow_reply(words: int = 60, delay: float = 0.05, held: threading.Event | None = None):
    """`words` paced pieces; given `held`, the second half waits until it is set, so that
    what the test does while the turn runs cannot race the provider's pace."""
    chunks = text_chunks("w " * words, pieces=words)
    if held is not None:
        chunks.insert(words // 2, Gate(held))
    return stream(*chunks, delay=delay)


def test_ndjson_when_asked(client_for, users, project, rojo, fake_provider):
    fake_provider.add(stream(*text_chunks("Hello there.", pieces=2)))
    response = client_for(users["editor"]).post(
        f"/api/projects/{project.pk}/chat",
        json={"rojo": rojo.pk, "message": "Hi"},
        headers={"Accept": "application/x-ndjson"},
    )
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/x-ndjson")
    assert response.headers["cache-control"].startswith("no-cache")
    lines = [json.loads(line) for line in response.text.splitlines()]
    assert [line["type"] for line in lines] == ["START", "CHAT", "CHAT", "DONE"]
    assert "".join(line.get("text", "") for line in lines) == "Hello there."


def test_outsider_gets_404_and_nothing_runs_or_is_stored(
    client_for, users, project, rojo, fake_provider
):
    response = client_for(users["outsider"]).post(
        f"/api/projects/{project.pk}/chat", json={"rojo": rojo.slug, "message": "Hi"}
    )
    assert response.status_code == 404
    assert fake_provider.requests == []
    assert Conversation.objects.count() == 0 and Message.objects.count() == 0


def test_anonymous_gets_401(client_for, project, rojo, fake_provider):
    response = client_for(None).post(
        f"/api/projects/{project.pk}/chat", json={"rojo": rojo.slug, "message": "Hi"}
    )
    assert response.status_code == 401
    assert Conversation.objects.count() == 0


def test_a_conversation_of_another_project_is_404(client_for, users, project, rojo, fake_provider):
    from roject.members.projects import project_create

    other = project_create(name="Other", owner=users["outsider"])
    foreign = Conversation.objects.create(project=other, rojo=rojo, title="secret")
    response = client_for(users["editor"]).post(
        f"/api/projects/{project.pk}/chat",
        json={"rojo": rojo.slug, "message": "Hi", "conversation": foreign.pk},
    )
    assert response.status_code == 404
    assert Message.objects.count() == 0


def test_viewer_chats_with_read_only_tools(client_for, users, project, rojo, fake_provider):
    fake_provider.add(stream(*text_chunks("Read-only here.")))
    events = client_for(users["viewer"]).chat(project.pk, rojo=rojo.slug, message="Hi")
    assert events[-1].type == "DONE"
    offered = {tool["function"]["name"] for tool in fake_provider.requests[0]["tools"]}
    assert offered == {"read_path_meta", "get_text_content", "list_files", "search_text"}


def test_second_message_while_a_turn_runs_gets_409(client_for, users, project, rojo, fake_provider):
    """The first reply holds half-way until the second message was answered."""
    answered = threading.Event()
    fake_provider.add(slow_reply(words=20, delay=0.05, held=answered))
    client = client_for(users["editor"])
    with client.chat_stream(project.pk, rojo=rojo.slug, message="First") as response:
        events = parse_sse(response.iter_lines())
        start = next(events)
        conversation = start.data["conversation"]
        busy = client_for(users["owner"]).post(
            f"/api/projects/{project.pk}/chat",
            json={"rojo": rojo.slug, "message": "Second", "conversation": conversation},
        )
        answered.set()
        rest = list(events)
    assert busy.status_code == 409
    assert "still running" in busy.json()["detail"]
    assert rest[-1].type == "DONE"
    assert [(m.role, m.content) for m in stored_history(conversation)] == [
        ("user", "First"),
        ("assistant", "w " * 20),
    ]


def test_reattach_after_disconnect_gets_what_was_missed_then_the_rest(
    client_for, users, project, rojo, fake_provider
):
    """The reply holds half-way until the re-attach was answered, so it re-attaches to a
    running turn however slowly the client comes back."""
    reattached = threading.Event()
    fake_provider.add(slow_reply(words=30, delay=0.03, held=reattached))
    client = client_for(users["editor"])
    with client.chat_stream(project.pk, rojo=rojo.slug, message="Tell me") as response:
        events = parse_sse(response.iter_lines())
        seen = [next(events) for _ in range(4)]
    conversation = seen[0].data["conversation"]

    with client.http.stream(
        "GET",
        f"/api/conversations/{conversation}/stream",
        headers={"Last-Event-ID": str(seen[-1].id)},
    ) as response:
        assert response.status_code == 200
        reattached.set()
        rest = list(parse_sse(response.iter_lines()))

    ids = [e.id for e in seen + rest]
    assert ids == list(range(1, len(ids) + 1))
    assert rest[-1].type == "DONE"
    text = "".join(e.data["text"] for e in seen + rest if e.type == "CHAT")
    assert text == "w " * 30
    assert stored_history(conversation)[-1].content == "w " * 30


def test_turn_outlives_a_closed_connection(client_for, users, project, rojo, fake_provider):
    """The reply holds half-way until the client hung up, so its end comes after."""
    closed = threading.Event()
    fake_provider.add(slow_reply(words=10, delay=0.02, held=closed))
    client = client_for(users["editor"])
    with client.chat_stream(project.pk, rojo=rojo.slug, message="Go on") as response:
        conversation = next(parse_sse(response.iter_lines())).data["conversation"]
    closed.set()

    wait_until(lambda: Conversation.objects.get(pk=conversation).turn_id is None)
    history = stored_history(conversation)
    assert [m.role for m in history] == ["user", "assistant"]
    assert history[-1].content == "w " * 10


def test_a_reply_saved_in_many_drafts_is_stored_whole_and_each_draft_is_its_beginning(
    client_for, users, project, rojo, fake_provider, settings
):
    """Each draft appends what came since the one before: read while the reply streams,
    every stored draft is the beginning of the reply, and the reply is stored exactly once
    over, with a tool call after the text (a step that goes on). The text holds at seven
    gates until a draft stored since the gate before was seen (one is due while the 15
    pieces between two gates come), so that a slow reader still sees more than five."""
    settings.ROJO_DRAFT_SECONDS = 0.05
    text = "".join(f"w{n} é " for n in range(120))
    chunks = text_chunks(text, pieces=120, finish=None)
    gates = {}  # the text before each gate: its event
    for place in range(105, 0, -15):
        gates["".join(c["choices"][0]["delta"]["content"] for c in chunks[:place])] = (
            opened := threading.Event()
        )
        chunks.insert(place, Gate(opened))
    fake_provider.add(
        stream(*chunks, *tool_call_chunks([("create_directory", {"path": "notes"})]), delay=0.01),
        stream(*text_chunks("Done.")),
    )
    client = client_for(users["editor"])
    drafts: set[str] = set()
    at_release: set[str] = set()  # the drafts stored when the last gate opened

    def stored_drafts() -> set[str]:
        return {m.content for m in stored_history(conversation)[1:] if m.draft}

    with client.chat_stream(project.pk, rojo=rojo.slug, message="Talk") as response:
        events = parse_sse(response.iter_lines())
        conversation = next(events).data["conversation"]
        streamed = ""
        for event in events:
            drafts.update(stored_drafts())
            streamed += event.data["text"] if event.type == "CHAT" else ""
            if streamed in gates:  # held: a draft since the last gate is stored, or on its way
                wait_until(lambda before=at_release: not stored_drafts() <= before)
                at_release = stored_drafts()
                drafts.update(at_release)
                gates.pop(streamed).set()
            if event.type == "DONE":
                break

    assert len(drafts) > 5
    assert all(text.startswith(draft) for draft in drafts)
    history = stored_history(conversation)
    assert [m.content for m in history][:2] == ["Talk", text]
    assert history[1].tool_calls[0]["function"]["name"] == "create_directory"
    assert [m.role for m in history] == ["user", "assistant", "tool", "assistant"]
    assert not any(m.draft for m in history)


def test_stop_cancels_the_turn_and_keeps_the_streamed_text(
    client_for, users, project, rojo, fake_provider, settings
):
    """Stopped after a draft of the reply was stored: the text streamed is kept as the
    reply, no longer a draft, so search finds it."""
    settings.ROJO_DRAFT_SECONDS = 0.1
    held = threading.Event()  # the reply's second half: it comes only after the Stop
    fake_provider.add(slow_reply(words=200, delay=0.05, held=held))
    client = client_for(users["editor"])
    with client.chat_stream(project.pk, rojo=rojo.slug, message="Talk") as response:
        events = parse_sse(response.iter_lines())
        seen = [next(events) for _ in range(3)]
        conversation = seen[0].data["conversation"]
        wait_until(lambda: [m.draft for m in stored_history(conversation)] == [False, True])
        stopped = client.post(f"/api/conversations/{conversation}/stop")
        rest = list(events)
    held.set()

    assert stopped.status_code == 200 and stopped.json() == {"stopping": True}
    assert [e.type for e in rest[-2:]] == ["ERROR", "DONE"]
    assert rest[-2].data["code"] == "stopped"
    streamed = "".join(e.data["text"] for e in seen + rest if e.type == "CHAT")
    assert 0 < len(streamed) < len("w " * 200)
    history = stored_history(conversation)
    assert [m.role for m in history] == ["user", "assistant"]
    assert history[-1].content == streamed
    assert history[-1].draft is False
    hits = client.get("/api/search", params={"q": "w"}).json()
    assert [hit["message"] for hit in hits] == [history[-1].pk]
    assert Conversation.objects.get(pk=conversation).turn_id is None


def test_stop_during_a_tool_call_stream_runs_nothing(
    client_for, users, project, rojo, fake_provider
):
    """The call's arguments hold half-way until the Stop was answered, so the Stop surely
    comes while the call is still being written."""
    call = ("write_text_content", {"path": "never.txt", "text": "x" * 400})
    chunks = tool_call_chunks([call], text_before="Writing it.")
    stopped = threading.Event()
    chunks.insert(len(chunks) // 2, Gate(stopped))
    fake_provider.add(stream(*chunks, delay=0.03))
    client = client_for(users["editor"])
    with client.chat_stream(project.pk, rojo=rojo.slug, message="Write") as response:
        events = parse_sse(response.iter_lines())
        seen = [next(events) for _ in range(2)]
        conversation = seen[0].data["conversation"]
        client.post(f"/api/conversations/{conversation}/stop")
        stopped.set()
        rest = list(events)

    assert "TOOL_CALL" not in {e.type for e in rest}
    assert rest[-1].type == "DONE"
    from roject.storage import project_root

    assert not (project_root(project.pk) / "never.txt").exists()
    history = stored_history(conversation)
    assert_history_valid(history)
    assert [m.role for m in history] == ["user", "assistant"]
    assert history[-1].tool_calls is None


def test_stop_needs_access(client_for, users, project, rojo, fake_provider):
    conversation = Conversation.objects.create(project=project, rojo=rojo)
    outsider = client_for(users["outsider"]).post(f"/api/conversations/{conversation.pk}/stop")
    idle = client_for(users["editor"]).post(f"/api/conversations/{conversation.pk}/stop")
    assert outsider.status_code == 404
    assert idle.json() == {"stopping": False}


def test_provider_error_is_one_clear_event_and_the_conversation_goes_on(
    client_for, users, project, rojo, fake_provider
):
    fake_provider.add(
        http_error(401, {"error": {"message": "Incorrect API key provided."}}),
        stream(*text_chunks("Now it works.")),
    )
    client = client_for(users["editor"])
    events = client.chat(project.pk, rojo=rojo.slug, message="Hi")
    assert [e.type for e in events] == ["START", "ERROR", "DONE"]
    message = events[1].data["message"]
    assert "401" in message and "Incorrect API key provided." in message
    assert fake_provider.base_url in message
    assert "sk-test-secret-key-123" not in json.dumps([e.data for e in events])

    conversation = events[0].data["conversation"]
    again = client.chat(project.pk, rojo=rojo.slug, message="Retry", conversation=conversation)
    assert [e.type for e in again] == ["START", "CHAT", "DONE"]
    assert [m.role for m in stored_history(conversation)] == ["user", "user", "assistant"]


def test_unreachable_provider_says_what_to_set(client_for, users, project, fake_provider):
    """An admin's rojo is set right in the admin; ROJO_BASE_URL sets only the demo rojo."""
    rojo = make_rojo("http://127.0.0.1:9/v1", slug="nowhere", name="Far away")
    demo = make_rojo("http://127.0.0.1:9/v1", slug="demo", api_key="", api_key_env="ROJO_API_KEY")
    client = client_for(users["editor"])

    events = client.chat(project.pk, rojo=rojo.slug, message="Hi")
    demo_events = client.chat(project.pk, rojo=demo.slug, message="Hi")

    assert [e.type for e in events] == ["START", "ERROR", "DONE"]
    message = events[1].data["message"]
    assert message == (
        "Could not connect to the provider at http://127.0.0.1:9/v1/. Check that it is running "
        "and that the base URL of the rojo 'Far away' in the admin is right."
    )
    assert "ROJO_BASE_URL" in demo_events[1].data["message"]


def test_a_base_url_without_its_path_names_what_sets_it(client_for, users, project, fake_provider):
    """The newcomer's ROJO_BASE_URL without /v1: the server answers 404, and the chat names
    the variables make run sets the demo rojo from; an admin's rojo, its page in the admin."""
    root = fake_provider.base_url.removesuffix("/v1")
    demo = make_rojo(root, slug="demo", name="Demo rojo", api_key="", api_key_env="ROJO_API_KEY")
    other = make_rojo(root, slug="other", name="Other")
    client = client_for(users["editor"])

    told = [
        client.chat(project.pk, rojo=rojo.slug, message="Hi")[1].data["message"]
        for rojo in (demo, other)
    ]

    assert told[0].startswith(
        "The model or endpoint was not found: check ROJO_BASE_URL and ROJO_MODEL, which make "
        "run sets the demo rojo's from (a base URL usually ends in /v1). "
        f"The provider at {root} answered 404"
    ), told[0]
    assert told[1].startswith(
        "The model or endpoint was not found: check the base URL and model name of the rojo "
        "'Other' in the admin (a base URL usually ends in /v1)."
    ), told[1]


def test_a_refused_key_names_the_variable_the_rojo_reads(
    client_for, users, project, fake_provider, monkeypatch
):
    """A rojo keyed by a variable of its own is told to set that one, not the demo's."""
    monkeypatch.setenv("ROJO_KEY_TEAM", "sk-team-key-0000")
    rojo = make_rojo(fake_provider.base_url, api_key="", api_key_env="ROJO_KEY_TEAM")
    fake_provider.add(http_error(401, {"error": {"message": "Incorrect API key provided."}}))

    events = client_for(users["editor"]).chat(project.pk, rojo=rojo.slug, message="Hi")

    message = events[1].data["message"]
    assert message.startswith(
        "The provider rejected the API key: set ROJO_KEY_TEAM in the server's environment, "
        "or the API key of the rojo 'Test rojo' in the admin."
    )
    assert "ROJO_API_KEY" not in message and "sk-team-key-0000" not in message


def test_unknown_rojo_is_404(client_for, users, project):
    response = client_for(users["editor"]).post(
        f"/api/projects/{project.pk}/chat", json={"rojo": "no-such-rojo", "message": "Hi"}
    )
    assert response.status_code == 404
    assert Conversation.objects.count() == 0


def test_empty_message_is_rejected(client_for, users, project, rojo):
    response = client_for(users["editor"]).post(
        f"/api/projects/{project.pk}/chat", json={"rojo": rojo.slug, "message": ""}
    )
    assert response.status_code == 422
    assert Conversation.objects.count() == 0


def test_messages_per_minute_limit_is_a_readable_429(
    client_for, users, project, rojo, fake_provider, settings
):
    settings.ROJO_USER_MESSAGES_PER_MINUTE = 2
    fake_provider.add(stream(*text_chunks("One.")), stream(*text_chunks("Two.")))
    client = client_for(users["editor"])
    client.chat(project.pk, rojo=rojo.slug, message="1")
    client.chat(project.pk, rojo=rojo.slug, message="2")

    third = client.post(
        f"/api/projects/{project.pk}/chat", json={"rojo": rojo.slug, "message": "3"}
    )

    assert third.status_code == 429 and third.headers["retry-after"] == "60"
    assert "2 messages in the last minute" in third.json()["detail"]
    assert Conversation.objects.count() == 2 and len(fake_provider.requests) == 2
    other = client_for(users["owner"])
    fake_provider.add(stream(*text_chunks("Yours.")))
    assert other.chat(project.pk, rojo=rojo.slug, message="mine")[-1].type == "DONE"


def test_concurrent_turns_limit_is_a_readable_429(
    client_for, users, project, rojo, fake_provider, settings
):
    settings.ROJO_USER_CONCURRENT_TURNS = 1
    answered = threading.Event()  # the first reply holds half-way until the second is refused
    fake_provider.add(slow_reply(words=20, delay=0.05, held=answered))
    client = client_for(users["editor"])
    with client.chat_stream(project.pk, rojo=rojo.slug, message="Long one") as response:
        events = parse_sse(response.iter_lines())
        next(events)
        second = client.post(
            f"/api/projects/{project.pk}/chat", json={"rojo": rojo.slug, "message": "Another"}
        )
        answered.set()
        rest = list(events)

    assert second.status_code == 429
    assert "You already have 1 reply running" in second.json()["detail"]
    assert rest[-1].type == "DONE"
    assert Conversation.objects.count() == 1


def test_a_crashed_turns_stale_claim_does_not_count_as_running(client_for, users, project, rojo):
    """A claim whose heartbeat stopped is a dead turn: not running, nothing to stop."""
    import uuid
    from datetime import timedelta

    from django.utils import timezone

    old = timezone.now() - timedelta(hours=1)
    dead = Conversation.objects.create(
        project=project, rojo=rojo, turn_id=uuid.uuid4(), turn_heartbeat=old
    )
    live = Conversation.objects.create(
        project=project, rojo=rojo, turn_id=uuid.uuid4(), turn_heartbeat=timezone.now()
    )
    client = client_for(users["editor"])

    assert client.get(f"/api/conversations/{dead.pk}").json()["running"] is False
    assert client.get(f"/api/conversations/{live.pk}").json()["running"] is True
    assert client.post(f"/api/conversations/{dead.pk}/stop").json() == {"stopping": False}


def test_a_turn_takes_the_role_and_budgets_its_request_read(
    client_for, users, project, rojo, fake_provider, crossings
):
    """The chat request reads the user's role and budgets; its turn's first step uses them
    instead of two more trips to the database before the first provider request. The next
    step, and each call, still read the role again."""
    fake_provider.add(
        stream(*tool_call_chunks([("list_files", {"path": "."})])),
        stream(*text_chunks("Listed.")),
    )
    events = client_for(users["editor"]).chat(project.pk, rojo=rojo.slug, message="List")
    assert [e.type for e in events][-2:] == ["CHAT", "DONE"]
    wait_until(lambda: "turn_end_blocking" in crossings)
    assert crossings.count("chat_context_get") == 1
    assert "budgets_left" not in crossings
    # aproject_role's reads: before the call runs, and before the second step; none first.
    assert crossings.count("project_role") == 2, crossings
