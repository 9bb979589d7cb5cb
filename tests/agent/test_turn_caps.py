"""Caps on one turn's work (#15), through the chat endpoint against the fake provider: tool
calls per response and per turn, and the bytes tool results may return in one turn. Past a
cap a call is answered with an error the model can act on, and not run."""

import json

import pytest

from roject.storage import project_root_create
from tests.support.fake_provider import stream, text_chunks, tool_call_chunks
from tests.support.helpers import assert_history_valid, files_in, make_rojo, stored_history

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def rojo(fake_provider, settings):
    settings.ROJO_PROVIDER_RETRIES = 0
    return make_rojo(fake_provider.base_url)


@pytest.fixture
def root(project):
    return project_root_create(project.pk)


def write(path: str) -> tuple[str, dict]:
    return ("write_text_content", {"path": path, "text": "x\n"})


def results(events) -> list:
    return [e.data["result"] for e in events if e.type == "TOOL_RESULT"]


def sent_tool_results(request: dict) -> list[str]:
    """The tool messages' contents of one request to the provider."""
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


def test_calls_past_32_in_one_response_are_answered_and_not_run(
    client_for, users, project, rojo, root, fake_provider
):
    """Before, one response ran 300 calls. Now the first 32 run (the default) and every
    other call is answered, so the history stays valid and the model can ask again."""
    calls = [write(f"n{n:02}.txt") for n in range(40)]
    fake_provider.add(
        stream(*tool_call_chunks(calls, arguments="whole")), stream(*text_chunks("Done."))
    )

    events = client_for(users["editor"]).chat(project.pk, rojo=rojo.slug, message="Write 40")

    assert sorted(files_in(root)) == [f"n{n:02}.txt" for n in range(32)]
    answered = results(events)
    assert answered[:32] == [{"ok": True}] * 32
    past_the_cap = {
        "error": "not run: only the first 32 tool calls of one response run "
        "(ROJO_MAX_CALLS_PER_RESPONSE); make this call again in your next response, "
        "with fewer calls at a time"
    }
    assert answered[32:] == [past_the_cap] * 8
    assert len(sent_tool_results(fake_provider.requests[1])) == 40
    assert events[-1].type == "DONE" and "ERROR" not in [e.type for e in events]
    assert_history_valid(stored_history(events[0].data["conversation"]))


def test_calls_past_the_turns_cap_are_answered_and_not_run(
    client_for, users, project, rojo, root, fake_provider, settings
):
    settings.ROJO_MAX_CALLS_PER_TURN = 5
    fake_provider.add(
        stream(*tool_call_chunks([write("a.txt"), write("b.txt"), write("c.txt")])),
        stream(*tool_call_chunks([write("d.txt"), write("e.txt"), write("f.txt")])),
        stream(*text_chunks("Five of six.")),
    )
    client = client_for(users["editor"])

    events = client.chat(project.pk, rojo=rojo.slug, message="Write six")

    assert sorted(files_in(root)) == ["a.txt", "b.txt", "c.txt", "d.txt", "e.txt"]
    assert results(events)[-1] == {
        "error": "not run: this reply has made the 5 tool calls one reply may make "
        "(ROJO_MAX_CALLS_PER_TURN); answer with what you have and say what is left to do: "
        "the user can reply to let you go on"
    }
    assert [e.data["text"] for e in events if e.type == "CHAT"] == ["Five of six."]
    assert_history_valid(stored_history(events[0].data["conversation"]))

    # The next message is a new turn, with its own count.
    fake_provider.add(stream(*tool_call_chunks([write("f.txt")])), stream(*text_chunks("All six.")))
    conversation = events[0].data["conversation"]
    again = client.chat(project.pk, rojo=rojo.slug, message="Go on", conversation=conversation)
    assert results(again) == [{"ok": True}] and "f.txt" in files_in(root)


def test_a_read_past_the_turns_read_budget_is_refused_with_what_is_left(
    client_for, users, project, rojo, root, fake_provider, settings
):
    """Before, one turn sent 41.5 MB of file content to the browser and to the provider."""
    settings.ROJO_TURN_READ_BYTES = 10_000
    notes = "n" * 39 + "\n"
    (root / "notes.txt").write_text(notes * 100)  # 4,000 bytes
    read = ("get_text_content", {"path": "notes.txt"})
    read_less = ("get_text_content", {"path": "notes.txt", "offset": 1, "limit": 10})
    fake_provider.add(
        stream(*tool_call_chunks([read, read, read], arguments="whole")),
        stream(*tool_call_chunks([read_less], arguments="whole")),
        stream(*tool_call_chunks([read], arguments="whole")),
        stream(*text_chunks("That is all I could read.")),
    )

    events = client_for(users["editor"]).chat(project.pk, rojo=rojo.slug, message="Read")

    answered = results(events)
    assert answered[:2] == [notes * 100] * 2
    assert answered[2] == {
        "error": "not returned: the result is 4,000 bytes, more than the 2,000 bytes left of "
        "this reply's read budget of 10,000 (ROJO_TURN_READ_BYTES); read less at a time: "
        "get_text_content with offset and limit, list_files with offset, a narrower "
        "search_text, read_result with a smaller length"
    }
    assert answered[3]["text"] == notes * 10  # the smaller read fits in what is left
    assert answered[4]["error"].startswith("not returned: the result is 4,000 bytes, more ")
    returned = [r for r in answered if not (isinstance(r, dict) and "error" in r)]
    returned_bytes = sum(len(r if isinstance(r, str) else json.dumps(r)) for r in returned)
    assert returned_bytes <= 10_000
    assert events[-1].type == "DONE" and "ERROR" not in [e.type for e in events]
    assert_history_valid(stored_history(events[0].data["conversation"]))
