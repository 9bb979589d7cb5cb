"""Recently deleted files: a deleted path's way back, since its history cannot be opened from
the tree any more. Against the live server, with real CSRF tokens."""

import pytest

from roject.members.projects import project_create
from roject.models import Role
from roject.storage import project_root_create
from rojos.models import FileChange
from tests.support.helpers import files_in

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def root(project):
    return project_root_create(project.pk)


def files_url(project_id: int) -> str:
    return f"/api/projects/{project_id}/files"


def test_a_deleted_file_is_listed_and_restored_with_its_content(client_for, users, project, root):
    editor = client_for(users["editor"])
    files = files_url(project.pk)
    editor.post(f"{files}/new", json={"path": "notes/a.md", "text": "alpha\n"})
    editor.post(f"{files}/new", json={"path": "kept.md", "text": "kept\n"})
    deleted = editor.post(f"{files}/delete", json={"path": "notes"})
    assert deleted.status_code == 200, deleted.text
    assert files_in(root) == {"kept.md": "kept\n"}

    listed = client_for(users["viewer"]).get(f"{files}/deleted")
    assert listed.status_code == 200
    assert [(e["paths"], e["author"], e["origin"]) for e in listed.json()] == [
        (["notes"], "editor", "person")
    ]

    change = listed.json()[0]["change"]
    restored = editor.post(f"{files}/deleted/restore", json={"change": change})
    assert restored.status_code == 200, restored.text
    assert restored.json() == {"change": change, "paths": ["notes"]}
    assert files_in(root) == {"kept.md": "kept\n", "notes/a.md": "alpha\n"}
    assert FileChange.objects.get(pk=change).undone_by == users["editor"]
    assert editor.get(f"{files}/deleted").json() == []


def test_a_path_that_exists_again_is_not_listed_and_its_restore_is_refused(
    client_for, users, project, root
):
    owner = client_for(users["owner"])
    files = files_url(project.pk)
    owner.post(f"{files}/new", json={"path": "a.md", "text": "old\n"})
    owner.post(f"{files}/delete", json={"path": "a.md"})
    change = owner.get(f"{files}/deleted").json()[0]["change"]
    owner.post(f"{files}/new", json={"path": "a.md", "text": "new\n"})

    assert owner.get(f"{files}/deleted").json() == []
    refused = owner.post(f"{files}/deleted/restore", json={"change": change})
    assert refused.status_code == 409
    assert "exists again" in refused.json()["detail"]
    assert files_in(root) == {"a.md": "new\n"}


def test_a_path_deleted_twice_shows_once_with_its_newest_deletion(client_for, users, project, root):
    owner = client_for(users["owner"])
    files = files_url(project.pk)
    for text in ("first\n", "second\n"):
        owner.post(f"{files}/new", json={"path": "a.md", "text": text})
        owner.post(f"{files}/delete", json={"path": "a.md"})
    listed = owner.get(f"{files}/deleted").json()
    assert len(listed) == 1
    owner.post(f"{files}/deleted/restore", json={"change": listed[0]["change"]})
    assert files_in(root) == {"a.md": "second\n"}


def test_only_writers_restore_and_other_projects_are_404(client_for, users, project, root):
    editor = client_for(users["editor"])
    files = files_url(project.pk)
    editor.post(f"{files}/new", json={"path": "a.md", "text": "x"})
    change = editor.post(f"{files}/delete", json={"path": "a.md"}).json()["change"]
    restore = {"change": change}

    viewer = client_for(users["viewer"])
    assert viewer.post(f"{files}/deleted/restore", json=restore).status_code == 403
    outsider = client_for(users["outsider"])
    assert outsider.get(f"{files}/deleted").status_code == 404
    assert outsider.post(f"{files}/deleted/restore", json=restore).status_code == 404
    # A change of this project named through another project the user writes: 404.
    elsewhere = project_create(
        name="Elsewhere", owner=users["owner"], members={users["editor"]: Role.EDITOR}
    )
    assert (
        editor.post(f"{files_url(elsewhere.pk)}/deleted/restore", json=restore).status_code == 404
    )
    no_csrf = client_for(users["editor"])
    del no_csrf.http.headers["X-CSRFToken"]
    assert no_csrf.post(f"{files}/deleted/restore", json=restore).status_code == 403
    assert files_in(root) == {}

    # A change that deleted nothing is not restored through here.
    made = editor.post(f"{files}/new", json={"path": "b.md", "text": "y"}).json()["change"]
    refused = editor.post(f"{files}/deleted/restore", json={"change": made})
    assert refused.status_code == 409
    assert files_in(root) == {"b.md": "y"}

    assert editor.post(f"{files}/deleted/restore", json=restore).status_code == 200
    assert files_in(root) == {"a.md": "x", "b.md": "y"}


def test_a_deletion_under_a_parent_now_a_link_out_is_not_restored_through_it(
    client_for, users, project, root
):
    """The gate refuses a path through a link out of the root: the list still answers, the
    restore is refused, and nothing is written where the link points."""
    owner = client_for(users["owner"])
    files = files_url(project.pk)
    owner.post(f"{files}/new", json={"path": "notes/a.md", "text": "x"})
    owner.post(f"{files}/delete", json={"path": "notes/a.md"})
    (root / "notes").rmdir()
    (root.parent / "outside").mkdir()
    (root / "notes").symlink_to(root.parent / "outside")
    listed = owner.get(f"{files}/deleted")
    assert listed.status_code == 200
    change = FileChange.objects.get(tool="delete_path").pk
    refused = owner.post(f"{files}/deleted/restore", json={"change": change})
    assert refused.status_code in (400, 409), refused.text
    assert list((root.parent / "outside").iterdir()) == []
