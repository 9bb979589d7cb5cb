"""The product's verification story, end to end over a live ASGI server and the fake provider."""

import pytest

from roject.storage import project_root
from rojos.models import FileChange
from tests.support.fake_provider import stream, text_chunks, tool_call_chunks
from tests.support.helpers import (
    DEFAULT_TOOLS,
    PAGE,
    STORY,
    assert_history_valid,
    make_rojo,
    stored_history,
)
from tests.support.live_server import ApiClient

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def editor_client(asgi_server, users):
    client = ApiClient(asgi_server, users["editor"])
    yield client
    client.close()


def script_story(fake_provider):
    fake_provider.add(
        stream(*tool_call_chunks([("create_directory", {"path": "docs/intro"})])),
        stream(
            *tool_call_chunks(
                [("write_text_content", {"path": "docs/intro/index.page", "text": PAGE})]
            )
        ),
        stream(
            *text_chunks("I created docs/intro/index.page with a header and an intro.", pieces=8)
        ),
    )


def test_verification_story_streams_tool_activity_then_the_reply(
    editor_client, fake_provider, project
):
    rojo = make_rojo(fake_provider.base_url)
    script_story(fake_provider)

    events = editor_client.chat(project.pk, rojo=rojo.slug, message=STORY)

    assert [e.type for e in events] == [
        "START",
        "TOOL_CALL",
        "TOOL_RESULT",
        "TOOL_CALL",
        "TOOL_RESULT",
        *["CHAT"] * 8,
        "DONE",
    ]
    assert [e.id for e in events] == list(range(1, len(events) + 1))
    create_call, create_result, write_call, write_result = events[1:5]
    assert (create_call.data["name"], create_call.data["args"]) == (
        "create_directory",
        {"path": "docs/intro"},
    )
    # Each change to the files comes with the id of its undo record.
    change = FileChange.objects.get(tool_call_id=create_call.data["id"])
    assert create_result.data == {
        "id": create_call.data["id"],
        "name": "create_directory",
        "result": {"ok": True},
        "ok": True,
        "change": change.pk,
    }
    assert (change.tool, change.paths, change.before) == (
        "create_directory",
        ["docs/intro"],
        [False],
    )
    assert write_call.data["name"] == "write_text_content"
    assert write_call.data["args"] == {"path": "docs/intro/index.page", "text": PAGE}
    assert write_result.data["ok"] is True
    reply = "".join(e.data["text"] for e in events if e.type == "CHAT")
    assert reply == "I created docs/intro/index.page with a header and an intro."

    page = project_root(project.pk) / "docs" / "intro" / "index.page"
    assert page.read_text() == PAGE

    conversation_id = events[0].data["conversation"]
    history = stored_history(conversation_id)
    assert [m.role for m in history] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]
    assert history[0].content == STORY and events[0].data["message"] == history[0].pk
    assert history[-1].content == reply
    assert_history_valid(history)


def test_provider_gets_the_tool_messages_back_with_matching_ids(
    editor_client, fake_provider, project
):
    rojo = make_rojo(fake_provider.base_url, system_prompt="Be brief.")
    script_story(fake_provider)

    editor_client.chat(project.pk, rojo=rojo.slug, message=STORY)

    first, second, third = fake_provider.requests
    assert set(first) == {"model", "messages", "tools", "stream", "stream_options"}
    assert first["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": STORY},
    ]
    assert [t["function"]["name"] for t in first["tools"]] == DEFAULT_TOOLS
    assistant, tool = second["messages"][2:]
    assert assistant["role"] == "assistant" and "content" not in assistant
    (call,) = assistant["tool_calls"]
    assert call["function"] == {"name": "create_directory", "arguments": '{"path": "docs/intro"}'}
    assert len(call["id"]) == 9 and call["id"].isalnum()
    assert tool == {"role": "tool", "tool_call_id": call["id"], "content": '{"ok": true}'}
    assert third["messages"][:4] == second["messages"]
    write_call = third["messages"][4]["tool_calls"][0]
    assert third["messages"][5]["tool_call_id"] == write_call["id"] != call["id"]


def test_second_message_continues_the_conversation(editor_client, fake_provider, project):
    rojo = make_rojo(fake_provider.base_url)
    fake_provider.add(stream(*text_chunks("Hello.")), stream(*text_chunks("Again.")))

    first = editor_client.chat(project.pk, rojo=rojo.slug, message="Hi")
    conversation = first[0].data["conversation"]
    second = editor_client.chat(
        project.pk, rojo=rojo.slug, message="Once more", conversation=conversation
    )

    assert second[0].data["conversation"] == conversation
    assert [m["content"] for m in fake_provider.requests[1]["messages"]] == [
        "Hi",
        "Hello.",
        "Once more",
    ]
    assert [m.role for m in stored_history(conversation)] == ["user", "assistant"] * 2
