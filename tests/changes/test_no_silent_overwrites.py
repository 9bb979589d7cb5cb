"""No silent overwrites by rojos: a file the rojo read and a person changed since is not
written, edited, moved or deleted by a later call of the same turn; the model is told who
changed it and when, and to read it again. A file it never read is written as before.

The person's change is made through the API while the turn runs: the fake provider makes
it when the rojo's next request arrives, then answers with the rojo's write.
"""

import pytest
from django.utils import timezone

from roject.storage import project_root_create
from rojos.models import default_tools
from tests.support.fake_provider import stream, text_chunks, tool_call_chunks
from tests.support.helpers import make_rojo

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def rojo(fake_provider, settings):
    settings.ROJO_PROVIDER_RETRIES = 0
    return make_rojo(
        fake_provider.base_url, tools=[*default_tools(), "delete_path"], approval_tools=[]
    )


@pytest.fixture
def root(project):
    return project_root_create(project.pk)


def calls(*pairs):
    return stream(*tool_call_chunks(list(pairs)))


def person_saves(client, project, path: str, text: str):
    """A reply that first has a person save `path` (from its current version)."""

    def save() -> None:
        files = f"/api/projects/{project.pk}/files"
        base = client.get(f"{files}/content", params={"path": path}).json()["version"]
        response = client.post(f"{files}/save", json={"path": path, "text": text, "base": base})
        assert response.status_code == 200, response.text

    return save


def run_turn(client, project, rojo, fake_provider, *replies) -> list[dict]:
    """Run one turn with `replies` (a callable runs first, then the next reply is sent)."""
    queue = []
    for reply in replies:
        if callable(reply):
            action, reply = reply, None
            queue.append(action)
            continue
        if queue:
            actions, queue = queue, []

            def responder(request, reply=reply, actions=actions):
                for action in actions:
                    action()
                return reply

            fake_provider.add(responder)
        else:
            fake_provider.add(reply)
    events = client.chat(project.pk, rojo=rojo.slug, message="Go")
    assert events[-1].type == "DONE"
    return [e.data for e in events if e.type == "TOOL_RESULT"]


@pytest.mark.parametrize(
    ("call", "args"),
    [
        ("write_text_content", {"path": "docs/a.md", "text": "rojo's\n"}),
        (
            "edit_text_content",
            {"path": "docs/a.md", "edits": [{"old_text": "alice", "new_text": "rojo"}]},
        ),
        ("move_path", {"source": "docs/a.md", "destination": "docs/b.md"}),
        ("delete_path", {"path": "docs"}),
    ],
)
def test_a_change_after_a_persons_save_is_refused_and_says_who(
    client_for, users, project, root, rojo, fake_provider, call, args
):
    (root / "docs").mkdir()
    (root / "docs" / "a.md").write_text("first\n")
    owner = client_for(users["owner"])
    results = run_turn(
        client_for(users["editor"]),
        project,
        rojo,
        fake_provider,
        calls(("get_text_content", {"path": "docs/a.md"})),
        person_saves(owner, project, "docs/a.md", "alice's\n"),
        calls((call, args)),
        stream(*text_chunks("I will read it again.")),
    )
    assert results[0]["ok"] and results[0]["result"] == "first\n"
    refused = results[1]
    assert not refused["ok"]
    now = timezone.localtime()
    assert refused["result"]["error"].startswith("docs/a.md changed since you read it (by owner, ")
    assert refused["result"]["error"].endswith("); read it again before writing")
    assert f"{now:%H}:" in refused["result"]["error"]
    assert (root / "docs" / "a.md").read_text() == "alice's\n"
    assert not (root / "docs" / "b.md").exists()


def test_a_file_never_read_is_written_as_before(
    client_for, users, project, root, rojo, fake_provider
):
    (root / "a.md").write_text("first\n")
    owner = client_for(users["owner"])
    results = run_turn(
        client_for(users["editor"]),
        project,
        rojo,
        fake_provider,
        calls(("list_files", {"path": ""})),
        person_saves(owner, project, "a.md", "alice's\n"),
        calls(("write_text_content", {"path": "a.md", "text": "rojo's\n"})),
        stream(*text_chunks("Done.")),
    )
    assert results[1]["ok"] and (root / "a.md").read_text() == "rojo's\n"


def test_the_rojos_own_writes_after_a_read_go_on(
    client_for, users, project, root, rojo, fake_provider
):
    """Read, write, write again: the turn's own change is what it knows, nothing is refused."""
    (root / "a.md").write_text("first\n")
    results = run_turn(
        client_for(users["editor"]),
        project,
        rojo,
        fake_provider,
        calls(("get_text_content", {"path": "a.md"})),
        calls(("write_text_content", {"path": "a.md", "text": "second\n"})),
        calls(("write_text_content", {"path": "a.md", "text": "third\n"})),
        stream(*text_chunks("Done.")),
    )
    assert [r["ok"] for r in results] == [True, True, True]
    assert (root / "a.md").read_text() == "third\n"


def test_a_file_shown_by_search_is_guarded_too(
    client_for, users, project, root, rojo, fake_provider
):
    (root / "a.md").write_text("needle\n")
    owner = client_for(users["owner"])
    results = run_turn(
        client_for(users["editor"]),
        project,
        rojo,
        fake_provider,
        calls(("search_text", {"query": "needle"})),
        person_saves(owner, project, "a.md", "changed\n"),
        calls(("write_text_content", {"path": "a.md", "text": "rojo's\n"})),
        stream(*text_chunks("Done.")),
    )
    assert "changed since you read it" in results[1]["result"]["error"]
    assert (root / "a.md").read_text() == "changed\n"
