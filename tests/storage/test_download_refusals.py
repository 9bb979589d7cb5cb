"""A download refuses what the tools refuse, before its response starts.

A file with other hard links (a window onto a file outside the project) and a FIFO planted
in the project root used to be answered 200, the stream then cut by a traceback in the
server's log. Now the file is opened, and refused, before the response: the tools' own
refusal as a 400, and nothing in the log. Against the live ASGI server.
"""

import logging
import os

import pytest

from roject.storage import project_root_create

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def server_log(caplog):
    """What the live server logs, its ASGI server's errors included (uvicorn's logger does
    not pass them on to the root logger, where caplog listens)."""
    caplog.set_level(logging.INFO)
    server = logging.getLogger("uvicorn.error")
    server.addHandler(caplog.handler)
    yield caplog
    server.removeHandler(caplog.handler)


def _download(client, project, path: str):
    return client.get(f"/api/projects/{project.pk}/files/download", params={"path": path})


def test_a_planted_hard_link_is_refused_before_the_response(
    client_for, users, project, tmp_path, server_log
):
    root = project_root_create(project.pk)
    outside = tmp_path / "secret.txt"
    outside.write_text("not the project's")
    os.link(outside, root / "planted.txt")

    response = _download(client_for(users["viewer"]), project, "planted.txt")

    assert response.status_code == 400
    detail = response.json()["detail"]
    assert detail.startswith("'planted.txt' has other hard links")
    assert "not the project's" not in response.text
    assert "Traceback" not in server_log.text
    assert not [r for r in server_log.records if r.levelno >= logging.ERROR], server_log.text


def test_a_planted_fifo_is_refused_before_the_response(client_for, users, project, server_log):
    root = project_root_create(project.pk)
    os.mkfifo(root / "pipe")

    response = _download(client_for(users["viewer"]), project, "pipe")

    assert response.status_code == 400
    assert response.json()["detail"] == "'pipe' is not a regular file"
    assert "Traceback" not in server_log.text
    assert not [r for r in server_log.records if r.levelno >= logging.ERROR], server_log.text


def test_the_refusals_are_the_tools_own(project, tmp_path):
    """The same words as read_file's, from the same check of the storage gate."""
    from roject.storage import StorageError, file_download_open, read_project_file

    root = project_root_create(project.pk)
    (tmp_path / "outside.txt").write_text("x")
    os.link(tmp_path / "outside.txt", root / "linked.txt")
    os.mkfifo(root / "pipe")
    for name in ("linked.txt", "pipe"):
        with pytest.raises(StorageError) as by_tool:
            read_project_file(root, name)
        with pytest.raises(StorageError) as by_download:
            file_download_open(root, name)
        assert str(by_download.value) == str(by_tool.value)
