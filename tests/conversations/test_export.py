"""Downloading a conversation as JSON or Markdown over the live API, for members only."""

import json

import pytest
from django.utils import timezone

from roject.members.projects import project_create
from rojos.conversations.export import conversation_export_markdown
from rojos.models import Conversation, FileChange, Message
from tests.support.helpers import PAGE, make_rojo
from tests.support.replay_story import (
    CREATE_ARGS,
    MESSAGES,
    READ_ARGS,
    REPLY_1,
    REPLY_2,
    TEXT_BEFORE,
    WRITE_ARGS,
)

pytestmark = pytest.mark.django_db(transaction=True)

READ_ERROR = "No such file or directory: 'notes.txt'"


def export_url(conversation_id: int, format: str | None = None) -> str:
    query = f"?format={format}" if format is not None else ""
    return f"/api/conversations/{conversation_id}/export{query}"


@pytest.mark.parametrize("member", ["owner", "editor", "viewer"])
@pytest.mark.parametrize(
    ("format", "content_type", "extension"),
    [("json", "application/json", "json"), ("markdown", "text/markdown", "md")],
)
def test_every_member_downloads_the_conversation_as_an_attachment(
    client_for, users, story, member, format, content_type, extension
):
    pk = story.conversation.pk

    response = client_for(users[member]).get(export_url(pk, format))

    assert response.status_code == 200
    assert response.headers["content-type"].startswith(content_type)
    assert response.headers["content-disposition"] == (
        f'attachment; filename="conversation-{pk}.{extension}"'
    )
    assert MESSAGES[0] in response.text


def test_json_is_the_default_format(client_for, users, story):
    response = client_for(users["viewer"]).get(export_url(story.conversation.pk))

    assert response.status_code == 200
    assert response.headers["content-disposition"].endswith('.json"')
    assert response.json()["conversation"]["id"] == story.conversation.pk


def test_an_outsider_gets_the_same_404_as_for_a_missing_conversation(client_for, users, story):
    outsider = client_for(users["outsider"])

    for format in ("json", "markdown", "bogus"):
        response = outsider.get(export_url(story.conversation.pk, format))
        assert response.status_code == 404
        assert response.json() == {"detail": "No such conversation."}
        assert "content-disposition" not in response.headers
        assert MESSAGES[0] not in response.text
    assert outsider.get(export_url(999999)).json() == {"detail": "No such conversation."}


def test_a_member_of_another_project_only_gets_404(client_for, users, story):
    project_create(name="Elsewhere", owner=users["outsider"], members={})

    response = client_for(users["outsider"]).get(export_url(story.conversation.pk, "markdown"))

    assert response.status_code == 404


def test_anonymous_gets_401(client_for, story):
    response = client_for().get(export_url(story.conversation.pk, "json"))

    assert response.status_code == 401
    assert MESSAGES[0] not in response.text


def test_an_unknown_format_is_a_400_for_a_member(client_for, users, story):
    response = client_for(users["viewer"]).get(export_url(story.conversation.pk, "pdf"))

    assert response.status_code == 400
    assert response.json() == {"detail": "format must be json or markdown"}
    assert "content-disposition" not in response.headers


def test_json_holds_the_openai_format_messages_metadata_and_turn_outcomes(client_for, users, story):
    conversation = story.conversation
    stored = story.messages()

    data = client_for(users["viewer"]).get(export_url(conversation.pk, "json")).json()

    assert data["conversation"] == {
        "id": conversation.pk,
        "title": MESSAGES[0],
        "project": {"id": conversation.project_id, "slug": "demo-project"},
        "rojo": {"slug": "test-rojo", "name": "Test rojo", "model": "fake-model"},
        "model": "fake-model",
        "user": "editor",
        "created": data["conversation"]["created"],
        "updated": data["conversation"]["updated"],
        "branch": 0,
        "branches": [],
    }
    messages = data["messages"]
    assert data["branch_path"] == [m.pk for m in stored]
    assert {m["branch"] for m in messages} == {0}
    assert [m["id"] for m in messages] == [m.pk for m in stored]
    assert [m["position"] for m in messages] == list(range(10))
    assert [(m["role"], m["content"]) for m in messages] == [
        ("user", MESSAGES[0]),
        ("assistant", TEXT_BEFORE),
        ("tool", '{"ok": true}'),
        ("tool", '{"ok": true}'),
        ("assistant", REPLY_1),
        ("user", MESSAGES[1]),
        ("assistant", None),
        ("tool", json.dumps({"error": READ_ERROR})),
        ("assistant", REPLY_2),
        ("user", MESSAGES[2]),
    ]
    create, write = messages[1]["tool_calls"]
    assert (create["type"], create["function"]["name"]) == ("function", "create_directory")
    assert json.loads(create["function"]["arguments"]) == CREATE_ARGS
    assert json.loads(write["function"]["arguments"]) == WRITE_ARGS
    (read,) = messages[6]["tool_calls"]
    assert json.loads(read["function"]["arguments"]) == READ_ARGS
    tool_answers = [
        (m["tool_call_id"], m["name"], m["is_error"]) for m in messages if m["role"] == "tool"
    ]
    assert tool_answers == [
        (create["id"], "create_directory", False),
        (write["id"], "write_text_content", False),
        (read["id"], "get_text_content", True),
    ]
    assert all("tool_calls" not in m for m in messages if m["role"] != "assistant")
    assert [(t["user_message"], t["status"]) for t in data["turns"]] == [
        (stored[0].pk, "done"),
        (stored[5].pk, "done"),
        (stored[9].pk, "error"),
    ]
    assert [t["error"] for t in data["turns"][:2]] == [None, None]
    assert data["turns"][2]["error"] == story.live[2][1]["message"]
    assert "answered 500" in data["turns"][2]["error"]
    assert all(t["finished"] for t in data["turns"])
    assert "sk-test-secret-key-123" not in json.dumps(data)


def test_markdown_is_a_readable_transcript_with_tool_activity_and_the_error(
    client_for, users, story
):
    conversation = story.conversation
    error = story.live[2][1]["message"]

    text = client_for(users["editor"]).get(export_url(conversation.pk, "markdown")).text

    write_args = json.dumps(WRITE_ARGS)
    assert text.splitlines() == [
        f"# {MESSAGES[0]}",
        "",
        f"Project **Demo Project** · rojo **Test rojo** (fake-model) · "
        f"started {conversation.created:%Y-%m-%d %H:%M} UTC",
        "",
        "## You",
        "",
        MESSAGES[0],
        "",
        "## Rojo",
        "",
        TEXT_BEFORE,
        "",
        '- ⚙ `create_directory` `{"path": "docs/intro"}` → ok',
        "",
        f"- ⚙ `write_text_content` `{write_args}` → ok",
        "",
        "## Rojo",
        "",
        REPLY_1,
        "",
        "## You",
        "",
        MESSAGES[1],
        "",
        f'- ⚙ `get_text_content` `{{"path": "notes.txt"}}` → error: {READ_ERROR}',
        "",
        "## Rojo",
        "",
        REPLY_2,
        "",
        "## You",
        "",
        MESSAGES[2],
        "",
        f"> **Error:** {error}",
    ]
    assert text.endswith("\n")
    assert "\\n" in write_args and PAGE not in text  # the page's newlines stay on one line


def test_exports_of_a_conversation_whose_rojo_was_deleted(client_for, users, story):
    story.rojo.delete()
    assert Conversation.objects.get(pk=story.conversation.pk).rojo is None
    owner = client_for(users["owner"])

    markdown = owner.get(export_url(story.conversation.pk, "markdown"))
    data = owner.get(export_url(story.conversation.pk, "json")).json()

    assert markdown.status_code == 200
    assert "Project **Demo Project** · rojo **deleted** · started " in markdown.text
    assert data["conversation"]["rojo"] is None
    assert len(data["messages"]) == 10


def test_markdown_code_stays_code_and_headings_stay_headings(project, users):
    """A reply stopped inside a code block, and arguments with a double backtick (common in
    reStructuredText): before, every later heading read as code, and the span closed early."""
    rojo = make_rojo("https://api.example.com/v1")
    conversation = Conversation.objects.create(project=project, rojo=rojo, user=users["editor"])
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "write_text_content", "arguments": '{"text": "Use ``pip`` here."}'},
    }
    for position, fields in enumerate(
        [
            {"role": "user", "content": "Show me"},
            {"role": "assistant", "content": "Here:\n\n```python\nprint('cut off"},
            {"role": "user", "content": "Write it"},
            {"role": "assistant", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_1", "content": '{"ok": true}'},
        ]
    ):
        Message.objects.create(conversation=conversation, position=position, **fields)

    markdown = conversation_export_markdown(conversation)

    assert "print('cut off\n```\n\n## You\n\nWrite it" in markdown
    assert '``` {"text": "Use ``pip`` here."} ```' in markdown


def test_exports_say_which_changes_were_undone(client_for, users, story):
    """An undone change reads "→ ok" no more without saying so."""
    conversation = story.conversation
    write = FileChange.objects.get(conversation=conversation, tool="write_text_content")
    FileChange.objects.filter(pk=write.pk).update(undone=timezone.now())
    client = client_for(users["editor"])

    exported = client.get(export_url(conversation.pk)).json()
    markdown = client.get(export_url(conversation.pk, "markdown")).text

    changes = {c["tool"]: c for c in exported["changes"]}
    assert changes["write_text_content"]["undone"] is not None
    assert changes["create_directory"]["undone"] is None
    assert changes["write_text_content"]["tool_call_id"] == write.tool_call_id
    assert f"- ⚙ `write_text_content` `{json.dumps(WRITE_ARGS)}` → ok (undone)" in markdown
    assert '`{"path": "docs/intro"}` → ok\n' in markdown
    assert [t["error_code"] for t in exported["turns"]] == [None, None, "provider"]
