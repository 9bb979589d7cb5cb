"""The JSON API over a live ASGI server: what each endpoint shows, and to whom."""

import pytest

from roject.members.projects import project_create
from roject.models import Role
from roject.storage import project_root_create
from rojos.models import Conversation, Message
from tests.support.fake_provider import stream, text_chunks, tool_call_chunks
from tests.support.helpers import PAGE, STORY, make_rojo

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "sk-test-secret-key-123"


def test_projects_lists_only_the_users_projects_with_the_role(client_for, users, project):
    other = project_create(
        name="Another Project", owner=users["owner"], members={users["viewer"]: Role.EDITOR}
    )
    project_create(name="Private", owner=users["owner"])

    response = client_for(users["viewer"]).get("/api/projects")

    assert response.status_code == 200
    assert response.json() == [
        {"id": other.pk, "name": "Another Project", "slug": "another-project", "role": "editor"},
        {"id": project.pk, "name": "Demo Project", "slug": "demo-project", "role": "viewer"},
    ]
    assert client_for(users["outsider"]).get("/api/projects").json() == []


def test_rojos_never_include_the_key_or_its_value(client_for, users, monkeypatch):
    monkeypatch.setenv("ROJO_KEY_TEST", "sk-from-the-environment-456")
    stored = make_rojo("https://api.example.com/v1", api_key=SECRET)
    from_env = make_rojo(
        "https://api.example.com/v1",
        name="Env",
        slug="env",
        api_key="",
        api_key_env="ROJO_KEY_TEST",
    )

    response = client_for(users["viewer"]).get("/api/rojos")

    assert response.status_code == 200
    body = response.text
    assert SECRET not in body and "sk-from-the-environment-456" not in body
    assert "api_key" not in body
    assert [r["id"] for r in response.json()] == [from_env.pk, stored.pk]
    assert set(response.json()[0]) == {"id", "name", "slug", "model", "base_url", "tools"} | {
        "context_window",
        "max_output_tokens",
        "window",
        "mcp_servers",
    }


def test_conversations_are_listed_newest_first(client_for, users, project):
    rojo = make_rojo("https://api.example.com/v1")
    older = Conversation.objects.create(project=project, rojo=rojo, user=users["owner"], title="A")
    newer = Conversation.objects.create(project=project, rojo=rojo, user=users["editor"], title="B")
    older.title = "A, touched last"
    older.save()
    other = project_create(name="Other", owner=users["owner"])
    Conversation.objects.create(project=other, rojo=rojo, user=users["owner"], title="Elsewhere")

    response = client_for(users["viewer"]).get(f"/api/projects/{project.pk}/conversations")

    assert response.status_code == 200
    listed = response.json()
    assert [c["id"] for c in listed] == [older.pk, newer.pk]
    assert listed[0]["title"] == "A, touched last"
    assert listed[0]["rojo_id"] == rojo.pk and listed[0]["user_id"] == users["owner"].pk
    assert listed[0]["running"] is False


def test_conversations_of_a_project_are_404_for_an_outsider(client_for, users, project):
    Conversation.objects.create(project=project, user=users["owner"], title="Secret plans")
    outsider = client_for(users["outsider"])

    response = outsider.get(f"/api/projects/{project.pk}/conversations")
    missing = outsider.get(f"/api/projects/{project.pk + 1000}/conversations")

    assert response.status_code == 404
    assert "Secret plans" not in response.text
    assert (missing.status_code, missing.json()) == (404, response.json())


def test_conversation_detail_has_tool_calls_and_results_after_a_story(
    client_for, users, project, fake_provider
):
    rojo = make_rojo(fake_provider.base_url)
    fake_provider.add(
        stream(*tool_call_chunks([("create_directory", {"path": "docs/intro"})])),
        stream(
            *tool_call_chunks(
                [("write_text_content", {"path": "docs/intro/index.page", "text": PAGE})]
            )
        ),
        stream(*text_chunks("Done: docs/intro/index.page.")),
    )
    events = client_for(users["editor"]).chat(project.pk, rojo=rojo.slug, message=STORY)
    conversation_id = events[0].data["conversation"]

    response = client_for(users["viewer"]).get(f"/api/conversations/{conversation_id}")

    assert response.status_code == 200
    detail = response.json()
    assert detail["id"] == conversation_id and detail["project_id"] == project.pk
    assert detail["running"] is False
    messages = detail["messages"]
    assert [m["role"] for m in messages] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]
    assert [m["position"] for m in messages] == list(range(6))
    assert messages[0]["content"] == STORY
    (create_call,) = messages[1]["tool_calls"]
    assert create_call["function"]["name"] == "create_directory"
    assert messages[2]["tool_call_id"] == create_call["id"]
    assert messages[2]["content"] == '{"ok": true}' and messages[2]["is_error"] is False
    (write_call,) = messages[3]["tool_calls"]
    assert write_call["function"]["name"] == "write_text_content"
    assert messages[4]["tool_call_id"] == write_call["id"]
    assert messages[5]["content"] == "Done: docs/intro/index.page."
    assert messages[5]["tool_calls"] is None


def joined_text(events) -> list[dict]:
    """Events as {type, data}, consecutive CHAT pieces joined as a stored message holds them."""
    joined: list[dict] = []
    for event in events:
        if event["type"] == "CHAT" and joined and joined[-1]["type"] == "CHAT":
            joined[-1] = {
                "type": "CHAT",
                "data": {"text": joined[-1]["data"]["text"] + event["data"]["text"]},
            }
        else:
            joined.append(event)
    return joined


def test_conversation_detail_events_are_what_the_turns_streamed(
    client_for, users, project, fake_provider
):
    """The page renders stored history from these events through its live handler."""
    rojo = make_rojo(fake_provider.base_url)
    (project_root_create(project.pk) / "notes.txt").write_text('{"title": "Notes"}\n')
    fake_provider.add(
        stream(*tool_call_chunks([("get_text_content", {"path": "notes.txt"})])),
        stream(*tool_call_chunks([("create_directory", {"path": "docs"})])),
        stream(*text_chunks("Read it and made docs.", pieces=5)),
        stream(*text_chunks("Hello again.")),
    )
    editor = client_for(users["editor"])
    first = editor.chat(project.pk, rojo=rojo.slug, message="Read notes.txt")
    conversation_id = first[0].data["conversation"]
    second = editor.chat(project.pk, rojo=rojo.slug, message="Hi", conversation=conversation_id)

    detail = client_for(users["viewer"]).get(f"/api/conversations/{conversation_id}").json()

    streamed = [{"type": e.type, "data": e.data} for e in [*first, *second]]
    assert detail["events"] == joined_text(streamed)
    assert [e["type"] for e in detail["events"]] == [
        "START",
        "TOOL_CALL",
        "TOOL_RESULT",
        "TOOL_CALL",
        "TOOL_RESULT",
        "CHAT",
        "DONE",
        "START",
        "CHAT",
        "DONE",
    ]
    assert detail["events"][2]["data"]["result"] == '{"title": "Notes"}\n'  # text, not JSON


def test_conversation_detail_is_404_for_an_outsider(client_for, users, project):
    conversation = Conversation.objects.create(project=project, user=users["owner"])
    Message.objects.create(conversation=conversation, position=0, role="user", content="hush")

    response = client_for(users["outsider"]).get(f"/api/conversations/{conversation.pk}")

    assert response.status_code == 404
    assert "hush" not in response.text
    assert str(project.pk) not in response.text


def test_conversation_detail_404_does_not_reveal_whether_the_id_exists(client_for, users, project):
    conversation = Conversation.objects.create(project=project, user=users["owner"])
    outsider = client_for(users["outsider"])

    existing = outsider.get(f"/api/conversations/{conversation.pk}")
    missing = outsider.get(f"/api/conversations/{conversation.pk + 1000}")

    assert (existing.status_code, existing.json()) == (missing.status_code, missing.json())


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/api/projects"),
        ("GET", "/api/rojos"),
        ("GET", "/api/projects/{project}/conversations"),
        ("GET", "/api/conversations/{conversation}"),
        ("GET", "/api/conversations/{conversation}/stream"),
        ("POST", "/api/conversations/{conversation}/stop"),
        ("POST", "/api/projects/{project}/chat"),
    ],
)
def test_anonymous_requests_get_401(client_for, users, project, method, path):
    rojo = make_rojo("https://api.example.com/v1")
    conversation = Conversation.objects.create(project=project, rojo=rojo, user=users["owner"])
    url = path.format(project=project.pk, conversation=conversation.pk)
    anonymous = client_for()

    if method == "GET":
        response = anonymous.get(url)
    else:
        response = anonymous.post(url, json={"rojo": rojo.slug, "message": "Hi"})

    assert response.status_code == 401
    assert set(response.json()) == {"detail"}
    assert Message.objects.count() == 0


def test_chat_without_the_csrf_header_is_403_and_stores_nothing(
    client_for, users, project, fake_provider
):
    rojo = make_rojo(fake_provider.base_url)
    editor = client_for(users["editor"])
    del editor.http.headers["X-CSRFToken"]

    response = editor.post(
        f"/api/projects/{project.pk}/chat", json={"rojo": rojo.slug, "message": "Hi"}
    )

    assert response.status_code == 403
    assert "CSRF" in response.json()["detail"]
    assert Conversation.objects.count() == 0
    assert Message.objects.count() == 0
    assert fake_provider.requests == []


def test_api_docs_serve_for_a_logged_in_user(client_for, users):
    response = client_for(users["viewer"]).get("/api/docs")

    assert response.status_code == 200
    assert "text/html" in response.headers["content-type"]


def test_openapi_schema_lists_the_chat_endpoint(client_for, users):
    response = client_for(users["viewer"]).get("/api/openapi.json")

    assert response.status_code == 200
    paths = response.json()["paths"]
    chat = paths["/api/projects/{project_id}/chat"]["post"]
    assert "/api/conversations/{conversation_id}/stream" in paths
    assert sorted(chat["responses"]) == [
        "200", "400", "401", "403", "404", "409", "413", "422", "429", "500", "503"
    ]  # fmt: skip
    error = chat["responses"]["429"]["content"]["application/json"]["schema"]
    assert error == {"$ref": "#/components/schemas/ErrorOut"}
    for path, operations in paths.items():
        for method, operation in operations.items():
            assert {"401", "503"} <= set(operation["responses"]), (method, path)


@pytest.mark.parametrize(
    ("headers", "body", "status", "detail"),
    [
        (
            {"Content-Type": "multipart/form-data"},
            b"{}",
            400,
            "The request's body could not be read.",
        ),
        (
            {"Content-Type": "application/json"},
            b'{"rojo": 1, "message": "' + b"x" * 3_000_000 + b'"}',
            413,
            "The request is over the server's 2,621,440-byte limit.",
        ),
    ],
    ids=["multipart-without-boundary", "too-big"],
)
def test_an_unreadable_body_gets_a_json_error_and_stores_nothing(
    client_for, users, project, headers, body, status, detail
):
    client = client_for(users["editor"])

    response = client.post(f"/api/projects/{project.pk}/chat", content=body, headers=headers)

    assert response.status_code == status
    assert response.json() == {"detail": detail}
    assert Conversation.objects.count() == 0


def test_a_file_too_big_to_show_is_refused_in_words_for_people(
    client_for, users, project, settings
):
    """The tool's message tells a model to read in parts; the file viewer is for people."""
    settings.ROJO_MAX_READ_BYTES = 100
    root = project_root_create(project.pk)
    (root / "big.txt").write_text("x" * 2_000)
    (root / "small.txt").write_text("hello\n")
    client = client_for(users["viewer"])

    big = client.get(f"/api/projects/{project.pk}/files/content", params={"path": "big.txt"})
    small = client.get(f"/api/projects/{project.pk}/files/content", params={"path": "small.txt"})

    assert big.status_code == 400
    assert big.json() == {
        "detail": "'big.txt' is 2,000 bytes, too big to show here (the limit is 100 bytes)"
    }
    assert small.json()["text"] == "hello\n"
