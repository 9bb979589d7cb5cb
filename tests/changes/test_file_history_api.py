"""One history per file: every recorded change to it, with who, how and the diff, and a
restore of an older version that is itself a recorded change."""

import contextlib
import fcntl
import os
import signal
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from roject.storage import change_lock_open, project_root_create
from roject.storage.layout import change_lock_path
from rojos.models import FileChange
from tests.support.live_server import wait_until

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


def _waits_for_the_change_lock(pid: int, project_id: int) -> bool:
    """Whether process `pid` holds the project's lock file open: a change there has read
    what it changes and is trying the lock."""
    lock = str(change_lock_path(project_id))
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            if os.readlink(fd) == lock:
                return True
    return False


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="reads /proc")
def test_a_restore_overtaken_by_an_undo_of_its_change_says_so(
    server_process, client_for, users, project, root
):
    """A restore reads its change, then waits for the change lock while an undo of that
    change (in another process) takes the change's copy away: it is refused with the reason,
    as a restore of an undone change is, not as a missing file (before: 400 "No such file or
    directory: 'a.md'", though a.md was there)."""
    files = f"/api/projects/{project.pk}/files"
    editor = client_for(users["editor"])
    assert editor.post(f"{files}/new", json={"path": "a.md", "text": "one\n"}).status_code == 200
    base = editor.get(f"{files}/content", params={"path": "a.md"}).json()["version"]
    saved = editor.post(f"{files}/save", json={"path": "a.md", "text": "two\n", "base": base})
    change = saved.json()["change"]
    restoring = server_process()
    restorer = client_for(users["owner"], base_url=restoring.base_url)

    lock = change_lock_open(project.pk)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the restore will wait for it
        with ThreadPoolExecutor(1) as pool:
            restore = {"change": change, "path": "a.md"}
            restored = pool.submit(restorer.post, f"{files}/restore", json=restore)
            wait_until(lambda: _waits_for_the_change_lock(restoring.process.pid, project.pk), 60)
            restoring.process.send_signal(signal.SIGSTOP)  # held where it waits
            try:
                os.close(lock)
                lock = None
                assert editor.post(f"/api/changes/{change}/undo").status_code == 200
            finally:
                restoring.process.send_signal(signal.SIGCONT)
            answer = restored.result(timeout=60)
    finally:
        if lock is not None:
            os.close(lock)

    assert answer.status_code == 409, answer.text
    assert answer.json() == {"detail": "that change was undone, and its copy of the file with it"}
    assert (root / "a.md").read_text() == "one\n"
    assert not FileChange.objects.filter(origin="restore").exists()
