"""Every request's body is limited on the wire, not only an upload's.

Django's ASGI handler reads a whole body (into a temporary file, on disk past
FILE_UPLOAD_MAX_MEMORY_SIZE) before any middleware or view runs, whatever its size: before,
anyone, logged in or not, could POST gigabytes to the login page or the API and fill the
server's disk, although the view would then refuse it. A body over the limit of what Django
would read (DATA_UPLOAD_MAX_MEMORY_SIZE, with room for a form's framing) is now answered 413
as it arrives; uploads keep their own, larger, limit (tests/changes/test_file_uploads_api.py)."""

import pytest

from roject.server.upload_guard import FRAMING_BYTES

pytestmark = pytest.mark.django_db(transaction=True)

MIB = 1 << 20


def _offered(mib: int):
    for _ in range(mib):
        yield b"x" * MIB


@pytest.mark.parametrize("path", ["/login/", "/api/projects/1/chat", "/logout/"])
def test_a_body_over_the_limit_is_refused_as_it_arrives_for_anyone(
    client_for, path, settings, caplog
):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = MIB
    response = client_for().post(
        path, content=_offered(32), headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 413
    assert "over the limit" in response.json()["detail"]
    assert not [r for r in caplog.records if r.name == "django.request"]  # no view ran


def test_a_declared_length_over_the_limit_is_refused_at_once(client_for, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = MIB
    limit = MIB + FRAMING_BYTES
    response = client_for().post(
        "/login/", content=b"x" * (limit + 1), headers={"Content-Type": "text/plain"}
    )
    assert response.status_code == 413


def test_a_body_within_the_limit_reaches_the_app(client_for, users, settings):
    """Up to the limit, the app answers as before: here, a JSON body Django reads."""
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = MIB
    editor = client_for(users["editor"])
    response = editor.post("/api/projects/999999/files/new", json={"path": "a" * (MIB // 2)})
    assert response.status_code == 404  # the project does not exist: the view ran
