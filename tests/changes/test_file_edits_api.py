"""People change a project's files from the file panel: each operation is one recorded change
(origin person, its author), viewers get none of them, and a save from an old version is 409.

Runs against the live ASGI server with real CSRF tokens.
"""

import pytest

from roject.storage import project_root_create
from rojos.models import FileChange
from tests.support.helpers import files_in

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def root(project):
    return project_root_create(project.pk)


@pytest.fixture
def editor(client_for, users):
    return client_for(users["editor"])


def post(client, project, action: str, **payload):
    return client.post(f"/api/projects/{project.pk}/files/{action}", json=payload)


def content(client, project, path: str) -> dict:
    response = client.get(f"/api/projects/{project.pk}/files/content", params={"path": path})
    assert response.status_code == 200, response.text
    return response.json()


def test_new_file_is_a_recorded_change_by_its_author(editor, project, root, users):
    """A new file is written and recorded with origin person and the editor as author."""
    response = post(editor, project, "new", path="docs/a.md", text="# A\n")
    assert response.status_code == 200, response.text
    change = FileChange.objects.get(pk=response.json()["change"])
    assert (change.origin, change.author) == ("person", users["editor"])
    assert change.tool == "write_text_content"
    assert change.paths == ["docs/a.md"] and change.conversation is None
    assert "+# A" in change.diffs[0]
    assert files_in(root) == {"docs/a.md": "# A\n"}


def test_new_file_on_a_taken_path_is_409_and_changes_nothing(editor, project, root):
    (root / "a.md").write_text("mine")
    response = post(editor, project, "new", path="a.md", text="theirs")
    assert response.status_code == 409
    assert "exists already" in response.json()["detail"]
    assert (root / "a.md").read_text() == "mine" and not FileChange.objects.exists()


def test_folder_rename_move_and_delete_each_recorded(editor, project, root):
    """New folder, rename of a file, move into the folder and delete: four records, in order."""
    (root / "a.md").write_text("A")
    assert post(editor, project, "folder", path="notes").status_code == 200
    assert post(editor, project, "move", source="a.md", destination="b.md").status_code == 200
    assert post(editor, project, "move", source="b.md", destination="notes/b.md").status_code == 200
    assert files_in(root) == {"notes/b.md": "A"}
    assert post(editor, project, "delete", path="notes").status_code == 200
    assert files_in(root) == {} and not (root / "notes").exists()
    tools = list(FileChange.objects.order_by("created", "pk").values_list("tool", flat=True))
    assert tools == ["create_directory", "move_path", "move_path", "delete_path"]


def test_a_persons_delete_is_undone_like_a_rojos(editor, project, root):
    (root / "keep").mkdir()
    (root / "keep" / "x.txt").write_text("x")
    change = post(editor, project, "delete", path="keep").json()["change"]
    assert not (root / "keep").exists()
    response = editor.post(f"/api/changes/{change}/undo")
    assert response.status_code == 200, response.text
    assert files_in(root) == {"keep/x.txt": "x"}


def test_save_from_the_loaded_version_writes(editor, project, root):
    (root / "a.md").write_text("one\n")
    loaded = content(editor, project, "a.md")
    response = post(editor, project, "save", path="a.md", text="two\n", base=loaded["version"])
    assert response.status_code == 200, response.text
    assert (root / "a.md").read_text() == "two\n"


def test_two_saves_from_the_same_base_the_second_gets_409_with_both_versions(
    editor, client_for, users, project, root
):
    """The second save is refused with the current version and text; the first one's text stays."""
    owner = client_for(users["owner"])
    (root / "a.md").write_text("base\n")
    base = content(editor, project, "a.md")["version"]
    first = post(owner, project, "save", path="a.md", text="owner's\n", base=base)
    assert first.status_code == 200
    second = post(editor, project, "save", path="a.md", text="editor's\n", base=base)
    assert second.status_code == 409
    body = second.json()
    assert body["currentText"] == "owner's\n"
    assert body["current"]["sha256"] != base["sha256"]
    assert (root / "a.md").read_text() == "owner's\n"
    again = post(editor, project, "save", path="a.md", text="merged\n", base=body["current"])
    assert again.status_code == 200 and (root / "a.md").read_text() == "merged\n"


@pytest.mark.parametrize(
    ("action", "payload"),
    [
        ("new", {"path": "n.md", "text": "x"}),
        ("folder", {"path": "d"}),
        ("move", {"source": "a.md", "destination": "b.md"}),
        ("delete", {"path": "a.md"}),
        ("save", {"path": "a.md", "text": "x", "base": None}),
    ],
)
def test_role_matrix_for_every_edit(client_for, users, project, root, action, payload):
    """Viewers get 403, outsiders and anonymous users 404/401; nothing changes for them."""
    (root / "a.md").write_text("A")
    for who, status in (("viewer", 403), ("outsider", 404)):
        response = post(client_for(users[who]), project, action, **payload)
        assert response.status_code == status, (who, response.text)
    assert post(client_for(), project, action, **payload).status_code == 401
    assert files_in(root) == {"a.md": "A"} and not FileChange.objects.exists()


def test_an_edit_without_the_csrf_header_is_403(client_for, users, project, root):
    editor = client_for(users["editor"])
    del editor.http.headers["X-CSRFToken"]
    response = post(editor, project, "new", path="n.md", text="x")
    assert response.status_code == 403
    assert files_in(root) == {}


def test_paths_go_through_the_gate(editor, project, root):
    for path in ("../out.md", "/etc/x", "a/../../b"):
        response = post(editor, project, "new", path=path, text="x")
        assert response.status_code == 400, (path, response.text)
    assert files_in(root) == {}


def test_a_save_with_no_base_creates_a_file_but_never_replaces_one(editor, project, root):
    """`base: null` says the editor started from no file: fine for a new path, a conflict
    when someone made the file meanwhile."""
    created = post(editor, project, "save", path="new.md", text="new\n", base=None)
    assert created.status_code == 200 and (root / "new.md").read_text() == "new\n"
    taken = post(editor, project, "save", path="new.md", text="other\n", base=None)
    assert taken.status_code == 409 and taken.json()["currentText"] == "new\n"
    assert (root / "new.md").read_text() == "new\n"
