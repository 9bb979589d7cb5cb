"""A backup taken while replies stream and a person uploads files is whole once restored.

The server runs as a process of its own; `manage.py backup` is another, started while two
replies stream (pausing between their parts) and uploads overwrite files in a loop. Once
restored into an empty installation: every history is valid (a reply caught streaming
ends interrupted with its text so far), and every file is whole and as its newest change
record says, with the undo copies of what the uploads replaced.
"""

import contextlib
import io
import os
import shutil
import subprocess
import sys
import threading

import pytest
from django.conf import settings
from django.core.management import call_command

from roject.backup.consistency import ChangeLocks
from roject.members.projects import project_create, project_delete
from roject.storage import digests, project_root, project_root_create
from rojos.models import Conversation, FileChange, Message, TurnRecord
from tests.backup.archive_contents import archive_contents
from tests.provider.test_pdfs_in import REPORT, upload
from tests.support.fake_provider import Pause, stream, text_chunks
from tests.support.helpers import assert_history_valid, make_rojo, stored_history
from tests.support.live_server import ApiClient, parse_sse, read_until, wait_until
from tests.support.server_process import database_url

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.backend]

RAW = {"Content-Type": "application/octet-stream"}
REPLIES = 10
BODIES = [bytes([n]) * (256 * 1024 + n) for n in range(8)]


def uploads_run(client: ApiClient, project_id: int, done: threading.Event, answers: list) -> None:
    """Overwrite four files in turn with whole bodies until the backup is done."""
    n = 0
    while not done.is_set() or n < len(BODIES):
        answer = client.post(
            f"/api/projects/{project_id}/files/upload",
            params={"path": f"uploads/file-{n % 4}.bin", "overwrite": "true"},
            content=BODIES[n % len(BODIES)],
            headers=RAW,
        )
        answers.append(answer.status_code)
        n += 1


def test_a_backup_taken_while_replies_stream_and_files_upload_restores_whole(
    server_process, users, project, fake_provider, storage_dir, tmp_path
):
    rojo = make_rojo(fake_provider.base_url)
    for _ in range(REPLIES):  # replies that stream until the server stops
        fake_provider.add(
            stream(text_chunks("Growing ", finish=None), Pause(60.0), text_chunks("never."))
        )
    server = server_process(
        ROJO_DRAFT_SECONDS="0",  # a reply's text stored at each chunk
        ROJO_USER_CONCURRENT_TURNS="0",
        ROJO_USER_MESSAGES_PER_MINUTE="0",
    )
    clients = [ApiClient(server.base_url, users["editor"]) for _ in range(REPLIES + 1)]
    streams = contextlib.ExitStack()
    for client in clients[:REPLIES]:
        response = streams.enter_context(client.chat_stream(project.pk, rojo=rojo.pk, message="Go"))
        read_until(parse_sse(response.iter_lines()), "CHAT")
    drafts = Message.objects.filter(role="assistant", draft=True, content="Growing ")
    wait_until(lambda: drafts.count() == REPLIES, timeout=60)  # the replies' text so far, stored
    done, answers = threading.Event(), []
    uploading = threading.Thread(
        target=uploads_run, args=(clients[REPLIES], project.pk, done, answers)
    )
    uploading.start()
    archive = tmp_path / "running.tar"
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "roject.settings",
        "SECRET_KEY": settings.SECRET_KEY,
        "DATABASE_URL": database_url(),
        "ROJO_STORAGE_DIR": str(storage_dir),
    }
    try:
        backup = subprocess.run(
            [sys.executable, "manage.py", "backup", str(archive)],
            cwd=settings.BASE_DIR, env=env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
    finally:
        done.set()
        uploading.join()
        streams.close()
        for client in clients:
            client.close()
        server.stop()
    assert backup.returncode == 0, backup.stderr
    assert set(answers) == {200}
    tables, _ = archive_contents(archive)
    caught = [row for row in tables["rojos.conversation"] if row["turn_id"] is not None]
    assert len(caught) == REPLIES  # every reply was running as the backup was taken

    call_command("flush", interactive=False, verbosity=0)
    shutil.rmtree(storage_dir)
    storage_dir.mkdir()
    call_command("restore", str(archive), stdout=io.StringIO())

    for conversation in Conversation.objects.all():
        assert not conversation.running
        history = stored_history(conversation.pk)
        assert_history_valid(history)
        assert [(m.role, m.content, m.draft) for m in history] == [
            ("user", "Go", False),
            ("assistant", "Growing ", False),  # its text as of the backup, kept
        ]
        assert conversation.turns.get().status == TurnRecord.Status.INTERRUPTED
    root = project_root(project.pk)
    for n in range(4):
        path = f"uploads/file-{n}.bin"
        newest = FileChange.objects.filter(paths=[path]).order_by("-created", "-pk").first()
        if newest is None:
            assert not (root / path).exists()
            continue
        assert digests(root, [path]) == newest.after  # the file as its record says
        assert (root / path).read_bytes() in BODIES  # whole
        for change in FileChange.objects.filter(paths=[path], before=[True]):
            copy = storage_dir / str(project.pk) / "undo" / change.key / "0"
            assert copy.read_bytes() in BODIES  # what the upload replaced, whole


def test_files_a_deletion_leaves_unused_go_only_once_a_backups_copy_is_done(
    client_for, users, project, fake_provider
):
    """A backup holds every change lock while it copies the storage, its snapshot taken: a
    conversation deleted meanwhile keeps its PDF on disk, and a project its storage, until
    the copy is done (else the archive had their rows without their files); the deletion
    itself does not wait."""
    rojo = make_rojo(fake_provider.base_url)
    fake_provider.add(stream(*text_chunks("Read.")))
    editor = client_for(users["editor"])
    sha256 = upload(editor, project.pk, REPORT).json()["sha256"]
    chat = {"rojo": rojo.slug, "message": "Read", "pdfs": [{"sha256": sha256, "name": "r.pdf"}]}
    conversation = editor.chat(project.pk, **chat)[0].data["conversation"]
    kept = project_root(project.pk).parent / "pdfs" / sha256
    doomed = project_create(name="Doomed", owner=users["owner"])
    project_root_create(doomed.pk)
    copying = ChangeLocks()
    copying.hold({project.pk, doomed.pk})
    try:
        assert editor.http.delete(f"/api/conversations/{conversation}").status_code in (200, 204)
        project_delete(project=doomed)
        assert kept.exists() and project_root(doomed.pk).exists()
    finally:
        copying.release()
    wait_until(lambda: not kept.exists() and not project_root(doomed.pk).parent.exists())
