"""project_access and aproject_access: who may read and write a project, and who sees nothing."""

import pytest
from django.contrib.auth.models import AnonymousUser
from django.core.exceptions import PermissionDenied
from django.http import Http404

from roject.members.access import LoginRequired, aproject_access, project_access
from roject.models import Role
from roject.storage import project_root

ALLOWED = [
    pytest.param("viewer", False, Role.VIEWER, id="viewer-reads"),
    pytest.param("editor", False, Role.EDITOR, id="editor-reads"),
    pytest.param("editor", True, Role.EDITOR, id="editor-writes"),
    pytest.param("owner", False, Role.OWNER, id="owner-reads"),
    pytest.param("owner", True, Role.OWNER, id="owner-writes"),
]
ANONYMOUS = [pytest.param(None, id="none"), pytest.param(AnonymousUser(), id="anonymous-user")]
UNKNOWN_IDS = [
    pytest.param("abc", id="non-numeric"),
    pytest.param("1; DROP TABLE roject_project", id="injection-ish"),
    pytest.param("", id="empty"),
    pytest.param("99999999999999999999999", id="beyond-bigint"),
    pytest.param("1.9", id="float"),
    pytest.param(" 1 ", id="padded"),
    pytest.param("\u0661", id="non-ascii-digit"),
    pytest.param(None, id="none"),
]


# Sync


@pytest.mark.parametrize(("username", "write", "role"), ALLOWED)
def test_member_with_enough_role_gets_access(users, project, username, write, role):
    """Viewers read; editors and owners read and write; the access names project and role."""
    access = project_access(user=users[username], project_id=project.id, write=write)
    assert access.project == project
    assert access.role == role
    assert access.can_write is (role != Role.VIEWER)


def test_viewer_write_is_permission_denied(users, project):
    """A viewer knows the project exists, so a write is a 403, not a 404."""
    with pytest.raises(PermissionDenied, match="read-only"):
        project_access(user=users["viewer"], project_id=project.id, write=True)


@pytest.mark.parametrize("write", [False, True])
@pytest.mark.parametrize("user", ANONYMOUS)
def test_anonymous_must_log_in(project, user, write):
    """Anonymous requests are sent to log in before anything about the project is checked."""
    with pytest.raises(LoginRequired):
        project_access(user=user, project_id=project.id, write=write)


@pytest.mark.parametrize("write", [False, True])
def test_outsider_gets_404(users, project, write):
    """A non-member cannot tell the project exists."""
    with pytest.raises(Http404):
        project_access(user=users["outsider"], project_id=project.id, write=write)


def test_unknown_project_gets_404(users, project):
    """A project id that does not exist is a 404, even for the owner of another project."""
    with pytest.raises(Http404):
        project_access(user=users["owner"], project_id=project.id + 1000)


@pytest.mark.parametrize("project_id", UNKNOWN_IDS)
def test_malformed_project_id_gets_404(users, project, project_id):
    """Ids that are not numbers are a 404, not a 500."""
    with pytest.raises(Http404):
        project_access(user=users["owner"], project_id=project_id)


def test_numeric_string_id_is_accepted(users, project):
    """Ids from URLs arrive as strings."""
    access = project_access(user=users["owner"], project_id=str(project.id))
    assert access.project == project


def test_outsider_and_unknown_project_look_the_same(users, project):
    """The 404 for someone else's project is word for word the 404 for no project."""
    with pytest.raises(Http404) as outsider:
        project_access(user=users["outsider"], project_id=project.id)
    with pytest.raises(Http404) as unknown:
        project_access(user=users["outsider"], project_id=project.id + 1000)
    assert str(outsider.value) == str(unknown.value)


# Async


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("username", "write", "role"), ALLOWED)
async def test_async_member_with_enough_role_gets_access(users, project, username, write, role):
    """The async twin grants the same access as the sync check."""
    access = await aproject_access(user=users[username], project_id=project.id, write=write)
    assert access.project == project
    assert access.role == role


@pytest.mark.django_db(transaction=True)
async def test_async_viewer_write_is_permission_denied(users, project):
    """The async twin refuses a viewer's write the same way."""
    with pytest.raises(PermissionDenied):
        await aproject_access(user=users["viewer"], project_id=project.id, write=True)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("user", ANONYMOUS)
async def test_async_anonymous_must_log_in(project, user):
    """The async twin asks anonymous users to log in."""
    with pytest.raises(LoginRequired):
        await aproject_access(user=user, project_id=project.id)


@pytest.mark.django_db(transaction=True)
async def test_async_outsider_gets_404(users, project):
    """The async twin hides the project from non-members."""
    with pytest.raises(Http404):
        await aproject_access(user=users["outsider"], project_id=project.id, write=True)


@pytest.mark.django_db(transaction=True)
async def test_async_unknown_project_gets_404(users, project):
    """The async twin answers an id that does not exist with a 404."""
    with pytest.raises(Http404):
        await aproject_access(user=users["owner"], project_id=project.id + 1000)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("project_id", UNKNOWN_IDS)
async def test_async_malformed_project_id_gets_404(users, project, project_id):
    """The async twin answers ids that are not numbers with a 404."""
    with pytest.raises(Http404):
        await aproject_access(user=users["owner"], project_id=project_id)


# Project creation


def test_project_create_makes_an_empty_file_root(project, storage_dir):
    """A new project gets storage/<id>/root/, empty and ready for files."""
    root = storage_dir / str(project.id) / "root"
    assert root.is_dir()
    assert list(root.iterdir()) == []
    assert project_root(project.id) == root


def test_project_create_records_each_member_role(users, project):
    """The owner, editor and viewer given at creation hold those roles."""
    roles = {m.user.username: m.role for m in project.memberships.select_related("user")}
    assert roles == {"owner": Role.OWNER, "editor": Role.EDITOR, "viewer": Role.VIEWER}
