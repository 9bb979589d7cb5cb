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

from roject.storage import digests, project_root
from rojos.models import Conversation, FileChange
from tests.support.fake_provider import Pause, stream, text_chunks
from tests.support.helpers import assert_history_valid, make_rojo, stored_history
from tests.support.live_server import ApiClient, parse_sse, read_until
from tests.support.server_process import database_url

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.backend]

RAW = {"Content-Type": "application/octet-stream"}
UPLOADS = 24
BODIES = [bytes([n]) * (256 * 1024 + n) for n in range(UPLOADS)]


def uploads_run(client: ApiClient, project_id: int, failures: list) -> None:
    for n, body in enumerate(BODIES):
        answer = client.post(
            f"/api/projects/{project_id}/files/upload",
            params={"path": f"uploads/file-{n % 4}.bin", "overwrite": "true"},
            content=body,
            headers=RAW,
        )
        if answer.status_code != 200:
            failures.append(answer.text)


def test_a_backup_taken_while_replies_stream_and_files_upload_restores_whole(
    server_process, users, project, fake_provider, storage_dir, tmp_path
):
    rojo = make_rojo(fake_provider.base_url)
    for _ in range(2):
        fake_provider.add(
            stream(text_chunks("Growing ", finish=None), Pause(1.0),
                   text_chunks("reply ", finish=None), Pause(1.0), text_chunks("done."))
        )  # fmt: skip
    server = server_process()
    clients = [ApiClient(server.base_url, users["editor"]) for _ in range(3)]
    failures: list[str] = []
    uploading = threading.Thread(target=uploads_run, args=(clients[2], project.pk, failures))
    streams = contextlib.ExitStack()
    replies = []
    for client in clients[:2]:
        response = streams.enter_context(client.chat_stream(project.pk, rojo=rojo.pk, message="Go"))
        events = parse_sse(response.iter_lines())
        read_until(events, "CHAT")
        replies.append(events)
    uploading.start()
    archive = tmp_path / "running.tar"
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "roject.settings",
        "SECRET_KEY": settings.SECRET_KEY,
        "DATABASE_URL": database_url(),
        "ROJO_STORAGE_DIR": str(storage_dir),
    }
    backup = subprocess.run(
        [sys.executable, "manage.py", "backup", str(archive)],
        cwd=settings.BASE_DIR, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    uploading.join()
    for events in replies:
        list(events)
    streams.close()
    for client in clients:
        client.close()
    server.stop()
    assert backup.returncode == 0, backup.stderr
    assert failures == []

    call_command("flush", interactive=False, verbosity=0)
    shutil.rmtree(storage_dir)
    storage_dir.mkdir()
    call_command("restore", str(archive), stdout=io.StringIO())

    for conversation in Conversation.objects.all():
        assert not conversation.running
        history = stored_history(conversation.pk)
        assert_history_valid(history)
        assert not any(message.draft for message in history)
        last = history[-1]  # the reply as far as it had come, if it had been stored yet
        assert last.role == "user" or last.content.startswith("Growing")
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
            assert (
                storage_dir / str(project.pk) / "undo" / change.key / "0"
            ).read_bytes() in BODIES
