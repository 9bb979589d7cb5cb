"""A change a crash cut off never takes the credit for, nor the undo of, work saved since.

A server process is killed (SIGKILL) while a person's save or a rojo's write has its
temporary file (tests/support/crash_points.py), before or after its rename. Someone then saves Y
through the surviving server. The cut-off change's record says what that change did (the
file as the crash left it, or nothing: no record), never Y; its undo is refused and Y kept.
"""

import contextlib
import threading

import httpx2
import pytest

from roject.storage import project_root_create, undo_dir
from rojos.models import FileChange
from tests.support.fake_provider import stream, tool_call_chunks
from tests.support.helpers import make_rojo
from tests.support.live_server import parse_sse, read_until, wait_until
from tests.turns.test_faults import doomed

pytestmark = pytest.mark.django_db(transaction=True)

Y = "Y, saved after the crash\n"


@pytest.fixture
def root(project):
    root = project_root_create(project.pk)
    (root / "notes.txt").write_text("mine\n")
    return root


def hanging_server(server_process, *, renamed: bool):
    """A server whose writes hang before their rename, or (`renamed`) just after it."""
    env = {"ROJO_TOOL_MODULES": "tests.support.crash_points"}
    if renamed:
        env["ROJO_TEST_HANG_AFTER_RENAME"] = "1"
    return doomed(server_process, **env)


def save(client, project, text: str, base) -> httpx2.Response:
    body = {"path": "notes.txt", "text": text, "base": base}
    return client.post(f"/api/projects/{project.pk}/files/save", json=body)


def version(client, project) -> dict:
    params = {"path": "notes.txt"}
    response = client.get(f"/api/projects/{project.pk}/files/content", params=params)
    assert response.status_code == 200, response.text
    return response.json()["version"]


def save_cut_off(client_for, users, project, root, server, *, renamed: bool) -> None:
    """A person's save of "theirs" through `server`, killed at its rename."""
    client = client_for(users["editor"], base_url=server.base_url)
    base = version(client, project)

    def send() -> None:
        with contextlib.suppress(httpx2.HTTPError):  # the server was killed under it
            save(client, project, "theirs\n", base)

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    if renamed:
        wait_until(lambda: (root / "notes.txt").read_text() == "theirs\n")
    else:
        wait_until(lambda: any(root.glob(".rojo-*.tmp")))
    server.kill()
    sender.join(timeout=10)


def history(client, project) -> list[dict]:
    params = {"path": "notes.txt"}
    response = client.get(f"/api/projects/{project.pk}/files/history", params=params)
    assert response.status_code == 200, response.text
    return response.json()


def test_a_persons_save_killed_after_its_rename_keeps_y_from_its_undo(
    client_for, users, project, root, server_process
):
    """The cut-off save is recorded as mine -> theirs; Y is the next save's; undo is refused."""
    server = hanging_server(server_process, renamed=True)
    save_cut_off(client_for, users, project, root, server, renamed=True)
    cut_off = FileChange.objects.get()
    assert cut_off.after is None

    survivor = client_for(users["owner"])
    saved = save(survivor, project, Y, version(survivor, project))
    assert saved.status_code == 200, saved.text
    undone = survivor.post(f"/api/changes/{cut_off.pk}/undo")

    assert undone.status_code == 409, undone.text
    assert "changed since" in undone.json()["detail"]
    assert (root / "notes.txt").read_text() == Y
    newest, older = history(survivor, project)
    assert (older["change"], older["author"]) == (cut_off.pk, users["editor"].username)
    assert "-mine" in older["diff"] and "+theirs" in older["diff"] and "Y" not in older["diff"]
    assert newest["author"] == users["owner"].username
    assert "-theirs" in newest["diff"] and "+Y" in newest["diff"]


def test_a_persons_save_killed_before_its_rename_is_no_change_and_y_is_kept(
    client_for, users, project, root, server_process
):
    """The rename never happened: the save changed nothing and leaves no record to undo."""
    server = hanging_server(server_process, renamed=False)
    save_cut_off(client_for, users, project, root, server, renamed=False)
    cut_off = FileChange.objects.get()

    survivor = client_for(users["owner"])
    saved = save(survivor, project, Y, version(survivor, project))
    assert saved.status_code == 200, saved.text
    undone = survivor.post(f"/api/changes/{cut_off.pk}/undo")

    assert undone.status_code == 404, undone.text
    assert (root / "notes.txt").read_text() == Y
    (only,) = history(survivor, project)
    assert (only["author"], only["origin"]) == (users["owner"].username, "person")
    assert "-mine" in only["diff"] and "+Y" in only["diff"]


def test_a_rojos_write_killed_after_its_rename_is_not_credited_with_y(
    client_for, users, project, root, fake_provider, server_process
):
    """Y saved before anyone reads the conversation: the repair on reading records the rojo's
    write as mine -> theirs, not as Y, and its undo is refused."""
    server = hanging_server(server_process, renamed=True)
    rojo = make_rojo(fake_provider.base_url, approval_tools=[])
    overwrite = ("write_text_content", {"path": "notes.txt", "text": "theirs\n"})
    fake_provider.add(stream(*tool_call_chunks([overwrite], arguments="whole")))
    client = client_for(users["editor"], base_url=server.base_url)
    with client.chat_stream(project.pk, rojo=rojo.slug, message="Go") as response:
        seen = read_until(parse_sse(response.iter_lines()), "TOOL_CALL")
        wait_until(lambda: (root / "notes.txt").read_text() == "theirs\n")
        server.kill()
    conversation = seen[0].data["conversation"]
    cut_off = FileChange.objects.get()

    survivor = client_for(users["owner"])
    saved = save(survivor, project, Y, version(survivor, project))
    assert saved.status_code == 200, saved.text
    read = survivor.get(f"/api/conversations/{conversation}")  # repairs the dead turn
    assert read.status_code == 200 and read.json()["running"] is False
    undone = survivor.post(f"/api/changes/{cut_off.pk}/undo")

    assert undone.status_code == 409, undone.text
    assert "changed since the rojo's write_text_content" in undone.json()["detail"]
    assert (root / "notes.txt").read_text() == Y
    newest, older = history(survivor, project)
    assert (older["change"], older["origin"]) == (cut_off.pk, "rojo")
    assert "+theirs" in older["diff"] and "Y" not in older["diff"]
    assert (newest["origin"], newest["author"]) == ("person", users["owner"].username)
    assert "-theirs" in newest["diff"] and "+Y" in newest["diff"]


def test_a_rojos_write_killed_before_its_rename_leaves_y_to_its_saver(
    client_for, users, project, root, fake_provider, server_process
):
    """The rojo's write changed nothing: after Y and a read, no record of it, Y kept."""
    server = hanging_server(server_process, renamed=False)
    rojo = make_rojo(fake_provider.base_url, approval_tools=[])
    overwrite = ("write_text_content", {"path": "notes.txt", "text": "theirs\n"})
    fake_provider.add(stream(*tool_call_chunks([overwrite], arguments="whole")))
    client = client_for(users["editor"], base_url=server.base_url)
    with client.chat_stream(project.pk, rojo=rojo.slug, message="Go") as response:
        seen = read_until(parse_sse(response.iter_lines()), "TOOL_CALL")
        wait_until(lambda: any(root.glob(".rojo-*.tmp")))
        server.kill()
    conversation = seen[0].data["conversation"]
    cut_off = FileChange.objects.get()

    survivor = client_for(users["owner"])
    saved = save(survivor, project, Y, version(survivor, project))
    assert saved.status_code == 200, saved.text
    assert survivor.get(f"/api/conversations/{conversation}").status_code == 200
    undone = survivor.post(f"/api/changes/{cut_off.pk}/undo")

    assert undone.status_code == 404, undone.text
    assert (root / "notes.txt").read_text() == Y
    (only,) = history(survivor, project)
    assert (only["origin"], only["author"]) == ("person", users["owner"].username)


@pytest.mark.parametrize("renamed", [False, True], ids=["before-put-back", "after-put-back"])
def test_an_undo_killed_part_way_is_finished_by_the_next_undo_not_refused(
    client_for, users, project, root, server_process, renamed
):
    """The undo of a move (notes.txt -> moved.txt) killed as it puts notes.txt back: its
    copy renamed in or not, moved.txt already removed. Before, the file was in neither place
    (or back, with the change not undone) and every undo was refused as "changed since";
    now the next undo finishes it and the change is undone, its copy gone."""
    editor = client_for(users["editor"])
    moved = editor.post(
        f"/api/projects/{project.pk}/files/move",
        json={"source": "notes.txt", "destination": "moved.txt"},
    )
    assert moved.status_code == 200, moved.text
    change = FileChange.objects.get(pk=moved.json()["change"])
    server = hanging_server(server_process, renamed=renamed)
    doomed_client = client_for(users["editor"], base_url=server.base_url)

    def send() -> None:
        with contextlib.suppress(httpx2.HTTPError):  # the server was killed under it
            doomed_client.post(f"/api/changes/{change.pk}/undo")

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    if renamed:
        wait_until(lambda: (root / "notes.txt").exists())
    else:
        wait_until(lambda: any(root.glob(".rojo-*.tmp")))
    server.kill()
    sender.join(timeout=10)
    assert not (root / "moved.txt").exists()
    assert FileChange.objects.get(pk=change.pk).undone is None

    undone = editor.post(f"/api/changes/{change.pk}/undo")

    assert undone.status_code == 200, undone.text
    assert (root / "notes.txt").read_text() == "mine\n"
    assert not (root / "moved.txt").exists()
    assert FileChange.objects.get(pk=change.pk).undone is not None
    assert not undo_dir(project.pk, change.key).exists()


def test_the_look_for_cut_off_changes_reads_the_unfinished_ones_alone(project, root, users):
    """Every change first finishes the records a crash left unfinished, read through their
    own index (file_change_unfinished): not every change the project ever had, which an
    ORDER BY on the query read through the time index (0.25 ms a change with 4,000)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from rojos.changes.undo import cut_off_changes_finish

    if connection.vendor != "sqlite":
        pytest.skip("SQLite's plans: PostgreSQL plans a small table by its statistics")
    change = {"project": project, "author": users["editor"], "tool": "write_text_content"}
    FileChange.objects.create(
        **change,
        paths=["notes.txt"],
        before=[True],
        after=["x"],
        key="done",
    )
    (root / "new.txt").write_text("written before the crash\n")
    FileChange.objects.create(**change, paths=["new.txt"], before=[False], after=None, key="c" * 32)

    with CaptureQueriesContext(connection) as queries:
        cut_off_changes_finish(project_id=project.pk, root=root)

    assert FileChange.objects.get(key="c" * 32).after is not None
    (looked,) = [q["sql"] for q in queries if q["sql"].startswith("SELECT")]
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN QUERY PLAN {looked}")
        plan = [row[-1] for row in cursor.fetchall()]
    assert plan == ["SEARCH rojos_filechange USING INDEX file_change_unfinished (project_id=?)"], (
        plan
    )
