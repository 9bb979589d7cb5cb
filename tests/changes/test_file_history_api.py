"""One history per file: every recorded change to it, with who, how and the diff, and a
restore of an older version that is itself a recorded change."""

import pytest

from roject.storage import project_root_create
from rojos.models import FileChange

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def root(project):
    return project_root_create(project.pk)


def test_history_lists_each_change_and_restore_brings_a_version_back(
    client_for, users, project, root
):
    editor, owner = client_for(users["editor"]), client_for(users["owner"])
    files = f"/api/projects/{project.pk}/files"
    assert editor.post(f"{files}/new", json={"path": "a.md", "text": "one\n"}).status_code == 200
    base = editor.get(f"{files}/content", params={"path": "a.md"}).json()["version"]
    saved = owner.post(f"{files}/save", json={"path": "a.md", "text": "two\n", "base": base})
    assert saved.status_code == 200
    uploaded = editor.post(
        f"{files}/upload",
        params={"path": "a.md", "overwrite": "true"},
        content=b"three\n",
        headers={"Content-Type": "application/octet-stream"},
    )
    assert uploaded.status_code == 200
    (root / "other.md").write_text("not in a.md's history")

    history = client_for(users["viewer"]).get(f"{files}/history", params={"path": "a.md"})
    assert history.status_code == 200
    entries = history.json()
    assert [(e["origin"], e["author"]) for e in entries] == [
        ("upload", "editor"),
        ("person", "owner"),
        ("person", "editor"),
    ]
    assert "-two\n+three" in entries[0]["diff"] and "-one\n+two" in entries[1]["diff"]
    assert all(e["restorable"] for e in entries)
    # Each change's own version is kept by the next newer change; the newest is the file now.
    assert [e["versionFrom"] for e in entries] == [None, entries[0]["change"], entries[1]["change"]]

    # Before the upload, the file was "two": restore that version.
    restore = {"change": entries[0]["change"], "path": "a.md"}
    assert client_for(users["viewer"]).post(f"{files}/restore", json=restore).status_code == 403
    restored = owner.post(f"{files}/restore", json=restore)
    assert restored.status_code == 200, restored.text
    assert (root / "a.md").read_text() == "two\n"
    change = FileChange.objects.get(pk=restored.json()["change"])
    assert (change.origin, change.author) == ("restore", users["owner"])
    assert owner.get(f"{files}/history", params={"path": "a.md"}).json()[0]["origin"] == "restore"
    # The restore is undone like any change; the upload's copy was kept for its own undo.
    assert owner.post(f"/api/changes/{change.pk}/undo").status_code == 200
    assert (root / "a.md").read_text() == "three\n"


def test_history_and_restore_of_another_project_are_404(client_for, users, project, root):
    outsider = client_for(users["outsider"])
    files = f"/api/projects/{project.pk}/files"
    assert outsider.get(f"{files}/history", params={"path": "a.md"}).status_code == 404
    editor = client_for(users["editor"])
    change = editor.post(f"{files}/new", json={"path": "a.md", "text": "x"}).json()["change"]
    assert (
        outsider.post(f"{files}/restore", json={"change": change, "path": "a.md"}).status_code
        == 404
    )
    response = editor.post(f"{files}/restore", json={"change": 999999, "path": "a.md"})
    assert response.status_code == 404
