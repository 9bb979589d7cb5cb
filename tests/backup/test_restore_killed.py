"""A restore killed in its last moments: between the projects' storage renamed into place
and the end of the database's commit. The process is really killed (SIGKILL, from inside
the restore's own process, at its commit); what it leaves is settled by the next
`storage_cleanup` (as by the next server start or restore), by whether the commit happened:
the old rows with the files as they were, or the archive's rows with the archive's files.
Before, the old rows stayed with the archive's files, the live ones hidden beside them."""

import io
import os
import signal
import subprocess
import sys

import pytest
from django.conf import settings
from django.core.management import call_command

from roject.models import AuditAction, AuditEntry, Project
from roject.storage import project_root
from tests.support.server_process import database_url

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.backend]

# Run in a process of its own: the restore, killed at the commit that follows its swap,
# before that commit ("before") or once it is made ("after").
KILLED_RESTORE = """
import os, signal, sys
import django
django.setup()
from django.core.management import call_command
from django.db.backends.base.base import BaseDatabaseWrapper
from roject.storage.staging import StorageStaging

when, archive = sys.argv[1], sys.argv[2]
swapped = []
swap_in, commit = StorageStaging.swap_in, BaseDatabaseWrapper.commit

def swap_in_seen(self, **kwargs):
    kept = swap_in(self, **kwargs)
    swapped.append(True)
    return kept

def commit_killed(self):
    if swapped and when == "before":
        os.kill(os.getpid(), signal.SIGKILL)
    commit(self)
    if swapped and when == "after":
        os.kill(os.getpid(), signal.SIGKILL)

StorageStaging.swap_in = swap_in_seen
BaseDatabaseWrapper.commit = commit_killed
call_command("restore", archive, "--replace")
"""


def _restore_killed(archive, storage_dir, when: str) -> None:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "roject.settings",
        "SECRET_KEY": settings.SECRET_KEY,
        "DATABASE_URL": database_url(),
        "ROJO_STORAGE_DIR": str(storage_dir),
    }
    done = subprocess.run(
        [sys.executable, "-c", KILLED_RESTORE, when, str(archive)],
        env=env,
        cwd=settings.BASE_DIR,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr


def _left_beside(storage_dir) -> list[str]:
    return sorted(p.name for p in storage_dir.iterdir() if not p.name.isdigit())


@pytest.mark.parametrize("when", ["before", "after"])
def test_a_restore_killed_at_its_commit_is_settled_by_whether_it_committed(
    users, project, tmp_path, storage_dir, when
):
    root = project_root(project.pk)
    (root / "notes.md").write_text("archived\n")
    archive = tmp_path / "backup.tar"
    call_command("backup", str(archive), stdout=io.StringIO())
    (root / "notes.md").write_text("live\n")
    (root / "live-only.md").write_text("made after the backup\n")
    Project.objects.filter(pk=project.pk).update(name="Renamed after the backup")

    _restore_killed(archive, storage_dir, when)
    out = io.StringIO()
    call_command("storage_cleanup", stdout=out)

    committed = when == "after"
    name = Project.objects.get(pk=project.pk).name
    assert name == (project.name if committed else "Renamed after the backup")
    files = {p.name: p.read_text() for p in root.iterdir()}
    if committed:  # the archive's rows, the archive's files
        assert files == {"notes.md": "archived\n"}
    else:  # the old rows, the files as they were
        assert files == {"notes.md": "live\n", "live-only.md": "made after the backup\n"}
    restored = AuditEntry.objects.filter(action=AuditAction.BACKUP_RESTORED)
    assert restored.count() == (1 if committed else 0)
    assert _left_beside(storage_dir) == []  # no staging, nothing set aside
    assert "removed" in out.getvalue()


def test_the_next_restore_settles_one_killed_before_its_commit_first(
    users, project, tmp_path, storage_dir
):
    """Settled later, the killed restore's journal would put its projects back over what the
    next restore placed: the next restore settles it before it begins."""
    root = project_root(project.pk)
    (root / "notes.md").write_text("archived\n")
    archive = tmp_path / "backup.tar"
    call_command("backup", str(archive), stdout=io.StringIO())
    (root / "notes.md").write_text("live\n")

    _restore_killed(archive, storage_dir, "before")
    call_command("restore", str(archive), "--replace", stdout=io.StringIO())
    call_command("storage_cleanup", stdout=io.StringIO())

    assert {p.name: p.read_text() for p in root.iterdir()} == {"notes.md": "archived\n"}
    assert _left_beside(storage_dir) == []
