"""No existence oracles: an id of another project's object answers exactly as a missing id does,
on every endpoint and page that takes one (same status, same body), over the live server."""

import uuid

import pytest

from roject.members.projects import project_create
from roject.storage import project_root_create
from rojos.models import Conversation, FileChange, Message
from tests.support.fake_provider import stream, text_chunks, tool_call_chunks
from tests.support.helpers import make_rojo
from tests.support.live_server import parse_sse, read_until

pytestmark = pytest.mark.django_db(transaction=True)

MISSING = 987_654


@pytest.fixture
def foreign(users, project):
    """Another project, which the editor is not a member of, with a conversation whose last
    reply has a call still waiting, a user message and a recorded change."""
    other = project_create(name="Secret Project", owner=users["owner"])
    rojo = make_rojo("http://127.0.0.1:9/v1")
    conversation = Conversation.objects.create(project=other, rojo=rojo, user=users["owner"])
    message = Message.objects.create(
        conversation=conversation, position=0, role="user", content="x"
    )
    Message.objects.create(
        conversation=conversation,
        position=1,
        role="assistant",
        tool_calls=[
            {
                "id": "call_foreign",
                "type": "function",
                "function": {"name": "write_text_content", "arguments": "{}"},
            }
        ],
    )
    change = FileChange.objects.create(
        project=other,
        conversation=conversation,
        tool="write_text_content",
        paths=["secret.txt"],
        before=[False],
        after=["file:x"],
        key=uuid.uuid4().hex,
    )
    return {"project": other, "conversation": conversation, "message": message, "change": change}


def answer(client, method: str, path: str, body: dict | None = None) -> tuple[int, str]:
    response = client.http.request(method, path, json=body)
    return response.status_code, response.text


def assert_same(client, method: str, foreign_path: str, missing_path: str, **bodies) -> None:
    seen = answer(client, method, foreign_path, bodies.get("foreign"))
    missing = answer(client, method, missing_path, bodies.get("missing"))
    assert seen == missing, (foreign_path, seen, missing)
    assert seen[0] == 404 or bodies.get("status") == seen[0], seen
    assert "Secret" not in seen[1] and "secret.txt" not in seen[1]


ID_ENDPOINTS = [
    ("GET", "/api/projects/{project}/conversations"),
    ("GET", "/api/projects/{project}/files"),
    ("GET", "/api/projects/{project}/files/content?path=secret.txt"),
    ("GET", "/api/projects/{project}/files/history?path=secret.txt"),
    ("GET", "/api/projects/{project}/files/download?path=secret.txt"),
    ("GET", "/api/projects/{project}/files/download"),
    ("GET", "/api/projects/{project}/live"),
    ("POST", "/api/projects/{project}/files/upload?path=secret.txt"),
    ("POST", "/api/projects/{project}/images"),
    ("GET", "/api/projects/{project}/images/" + "0" * 64),
    ("POST", "/api/projects/{project}/pdfs"),
    ("GET", "/api/projects/{project}/pdfs/" + "0" * 64),
    ("GET", "/api/conversations/{conversation}"),
    ("GET", "/api/conversations/{conversation}/export"),
    ("GET", "/api/conversations/{conversation}/export?format=markdown"),
    ("GET", "/api/conversations/{conversation}/results/r" + "0" * 32),
    ("GET", "/api/conversations/{conversation}/stream"),
    ("POST", "/api/conversations/{conversation}/stop"),
    ("POST", "/api/changes/{change}/undo"),
    ("GET", "/api/changes/{change}/diff"),
    ("GET", "/projects/{project}/"),
    ("GET", "/projects/{project}/c/{conversation}/"),
    ("GET", "/projects/{project}/c/{conversation}/read/"),
]


@pytest.mark.parametrize(("method", "template"), ID_ENDPOINTS, ids=[t for _, t in ID_ENDPOINTS])
def test_an_id_of_another_project_answers_as_a_missing_one(
    client_for, users, project, foreign, method, template
):
    editor = client_for(users["editor"])
    ids = {key: foreign[key].pk for key in ("project", "conversation", "change")}
    missing = dict.fromkeys(ids, MISSING)

    assert_same(editor, method, template.format(**ids), template.format(**missing))


FILE_WRITES = [
    ("new", {"path": "secret.txt", "text": "x"}),
    ("folder", {"path": "secret"}),
    ("move", {"source": "secret.txt", "destination": "b.txt"}),
    ("delete", {"path": "secret.txt"}),
    ("save", {"path": "secret.txt", "text": "x", "base": None}),
    ("restore", {"change": 1, "path": "secret.txt"}),
]


@pytest.mark.parametrize(("action", "body"), FILE_WRITES, ids=[a for a, _ in FILE_WRITES])
def test_a_file_change_in_another_project_answers_as_a_missing_one(
    client_for, users, project, foreign, action, body
):
    editor = client_for(users["editor"])
    assert_same(
        editor,
        "POST",
        f"/api/projects/{foreign['project'].pk}/files/{action}",
        f"/api/projects/{MISSING}/files/{action}",
        foreign=body,
        missing=body,
    )


def test_restoring_another_projects_change_answers_as_a_missing_one(
    client_for, users, project, foreign
):
    editor = client_for(users["editor"])
    assert_same(
        editor,
        "POST",
        f"/api/projects/{project.pk}/files/restore",
        f"/api/projects/{project.pk}/files/restore",
        foreign={"change": foreign["change"].pk, "path": "secret.txt"},
        missing={"change": MISSING, "path": "secret.txt"},
    )


def test_restoring_another_projects_deletion_answers_as_a_missing_one(
    client_for, users, project, foreign
):
    editor = client_for(users["editor"])
    assert_same(
        editor,
        "POST",
        f"/api/projects/{project.pk}/files/deleted/restore",
        f"/api/projects/{project.pk}/files/deleted/restore",
        foreign={"change": foreign["change"].pk},
        missing={"change": MISSING},
    )


@pytest.mark.parametrize("path", ["approve", "undo-turn"])
def test_a_write_endpoint_with_another_projects_conversation_answers_as_a_missing_one(
    client_for, users, project, foreign, path
):
    editor = client_for(users["editor"])
    body = {"call": "call_foreign", "approve": True, "message": foreign["message"].pk}

    assert_same(
        editor,
        "POST",
        f"/api/conversations/{foreign['conversation'].pk}/{path}",
        f"/api/conversations/{MISSING}/{path}",
        foreign=body,
        missing=body,
    )


def test_a_conversation_of_another_project_in_a_chat_answers_as_a_missing_one(
    client_for, users, project, foreign
):
    rojo = make_rojo("http://127.0.0.1:9/v1", slug="mine")
    editor = client_for(users["editor"])
    message = {"rojo": rojo.slug, "message": "Hello"}

    assert_same(
        editor,
        "POST",
        f"/api/projects/{project.pk}/chat",
        f"/api/projects/{project.pk}/chat",
        foreign={**message, "conversation": foreign["conversation"].pk},
        missing={**message, "conversation": MISSING},
    )
    assert_same(
        editor,
        "POST",
        f"/api/projects/{foreign['project'].pk}/chat",
        f"/api/projects/{MISSING}/chat",
        foreign=message,
        missing=message,
    )
    assert not Message.objects.filter(content__contains="Hello").exists()


def test_another_conversations_ids_in_ones_own_answer_as_missing_ones(
    client_for, users, project, foreign
):
    """In the editor's own conversation: a page URL with another project's conversation, and
    undo-turn with another conversation's message id."""
    rojo = make_rojo("http://127.0.0.1:9/v1", slug="mine")
    own = Conversation.objects.create(project=project, rojo=rojo, user=users["editor"])
    editor = client_for(users["editor"])

    assert_same(
        editor,
        "GET",
        f"/projects/{project.pk}/c/{foreign['conversation'].pk}/",
        f"/projects/{project.pk}/c/{MISSING}/",
    )
    assert_same(
        editor,
        "GET",
        f"/projects/{project.pk}/c/{foreign['conversation'].pk}/read/",
        f"/projects/{project.pk}/c/{MISSING}/read/",
    )
    assert_same(
        editor,
        "POST",
        f"/api/conversations/{own.pk}/undo-turn",
        f"/api/conversations/{own.pk}/undo-turn",
        foreign={"message": foreign["message"].pk},
        missing={"message": MISSING},
    )


def test_approving_another_conversations_call_answers_as_a_missing_call(
    client_for, users, project, foreign, fake_provider, settings
):
    """While the editor's own turn waits for approval, the id of a call waiting in another
    project's conversation is refused exactly as an id that was never issued."""
    settings.ROJO_PROVIDER_RETRIES = 0
    settings.ROJO_APPROVAL_TIMEOUT = 20
    (project_root_create(project.pk) / "note.txt").write_text("old\n")
    rojo = make_rojo(fake_provider.base_url, slug="mine")
    fake_provider.add(
        stream(*tool_call_chunks([("write_text_content", {"path": "note.txt", "text": "new\n"})])),
        stream(*text_chunks("Left it.")),
    )
    editor = client_for(users["editor"])
    decider = client_for(users["editor"])

    with editor.chat_stream(project.pk, rojo=rojo.slug, message="Change the note") as response:
        events = parse_sse(response.iter_lines())
        seen = read_until(events, "APPROVAL_REQUIRED")
        own = seen[0].data["conversation"]
        url = f"/api/conversations/{own}/approve"

        assert_same(
            decider,
            "POST",
            url,
            url,
            foreign={"call": "call_foreign", "approve": True},
            missing={"call": "call_never_issued", "approve": True},
            status=409,
        )
        denied = decider.post(url, json={"call": seen[-1].data["id"], "approve": False})
        assert denied.json() == {"delivered": True}
        rest = list(events)

    assert rest[-1].type == "DONE"
    assert (project_root_create(project.pk) / "note.txt").read_text() == "old\n"
