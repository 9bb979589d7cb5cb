"""`restore --replace` replaces the storage an archive carries, and only that.

A database-only archive, or one of some projects, carries no storage for the others: their
files stay as they are when their projects are restored, and go only with a project the
restored database no longer has (a later project given its id would find them).
"""

import io
import threading

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from roject.members.projects import project_create
from roject.models import Project
from roject.storage import project_root
from roject.storage.layout import project_dir
from rojos.models import Conversation
from tests.support.fake_provider import Gate, stream, text_chunks
from tests.support.helpers import assert_history_valid, make_rojo, stored_history
from tests.support.live_server import parse_sse

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.backend]


def restored(path, *options) -> str:
    out = io.StringIO()
    call_command("restore", str(path), "--replace", *options, stdout=out)
    return out.getvalue()


def test_a_database_only_archive_keeps_every_projects_files(users, project, tmp_path):
    (project_root(project.pk) / "notes.md").write_text("kept\n")
    path = tmp_path / "database.tar"
    call_command("backup", str(path), "--database-only", stdout=io.StringIO())
    (project_root(project.pk) / "later.md").write_text("written after the backup\n")

    out = restored(path)

    assert Project.objects.filter(pk=project.pk).exists()
    assert sorted(p.name for p in project_root(project.pk).iterdir()) == ["later.md", "notes.md"]
    assert "kept the storage of 1 project the archive does not carry" in out


def test_a_project_the_restore_removes_loses_its_storage(users, project, tmp_path):
    """The project made after the backup is not in the restored database: its files go."""
    path = tmp_path / "database.tar"
    call_command("backup", str(path), "--database-only", stdout=io.StringIO())
    later = project_create(name="Later", owner=users["owner"])
    (project_root(later.pk) / "later.md").write_text("later\n")

    restored(path)

    assert not Project.objects.filter(pk=later.pk).exists()
    assert not project_dir(later.pk).exists()
    assert project_root(project.pk).is_dir()


def test_an_archive_of_some_projects_replaces_only_theirs(users, project, tmp_path):
    other = project_create(name="Other", owner=users["owner"])
    (project_root(project.pk) / "mine.md").write_text("archived\n")
    (project_root(other.pk) / "theirs.md").write_text("not archived\n")
    path = tmp_path / "some.tar"
    call_command("backup", str(path), "--project", str(project.pk), stdout=io.StringIO())
    (project_root(project.pk) / "after.md").write_text("after\n")
    (project_root(other.pk) / "after.md").write_text("after\n")

    restored(path)

    assert sorted(p.name for p in project_root(project.pk).iterdir()) == ["mine.md"]
    assert sorted(p.name for p in project_root(other.pk).iterdir()) == ["after.md", "theirs.md"]


def test_no_one_stays_logged_in_through_a_restore(client_for, users, project, tmp_path):
    """Sessions are read from the cache (Redis, shared by the processes): a restore deletes
    the database's and their cached copies, so everyone logs in again, as the docs say,
    even where the restored user is the same row with the same password."""
    path = tmp_path / "before.tar"
    call_command("backup", str(path), stdout=io.StringIO())
    editor = client_for(users["editor"])
    assert editor.get("/api/projects").status_code == 200

    restored(path)

    assert editor.get("/api/projects").status_code == 401
    assert client_for(users["editor"]).get("/api/projects").status_code == 200  # a new login


def test_a_restore_while_the_session_cache_cannot_be_reached_is_refused(
    client_for, users, project, tmp_path, settings
):
    """Redis out of reach: the cached sessions could not be ended, so nothing is restored
    and the installation stays as it was; it restores once the cache is back."""
    path = tmp_path / "before.tar"
    call_command("backup", str(path), stdout=io.StringIO())
    later = project_create(name="Later", owner=users["owner"])
    assert client_for(users["editor"]).get("/api/projects").status_code == 200
    reachable = settings.CACHES
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": "redis://127.0.0.1:9/0",  # nothing listens there: refused at once
        }
    }

    with pytest.raises(CommandError, match=r"session cache cannot be reached.*nothing was"):
        restored(path)

    assert Project.objects.filter(pk=later.pk).exists()
    settings.CACHES = reachable
    restored(path)
    assert not Project.objects.filter(pk=later.pk).exists()


def test_a_restore_waits_while_a_reply_runs_on_the_installations_servers(
    client_for, users, project, tmp_path, fake_provider
):
    """A reply running on a server of the installation would go on writing by the ids it
    holds, into the rows the restore replaces: the restore is refused, nothing changed,
    and goes through once the reply has ended."""
    path = tmp_path / "before.tar"
    call_command("backup", str(path), stdout=io.StringIO())
    later = project_create(name="Later", owner=users["owner"])
    rojo = make_rojo(fake_provider.base_url)
    held = threading.Event()
    fake_provider.add(
        stream(*text_chunks("Half of it, "), Gate(held), *text_chunks("and the rest."))
    )
    client = client_for(users["editor"])

    with client.chat_stream(project.pk, rojo=rojo.slug, message="Go") as response:
        events = parse_sse(response.iter_lines())
        conversation = next(events).data["conversation"]
        assert next(events).type == "CHAT"  # the reply runs, held at the gate
        with pytest.raises(CommandError, match=r"1 reply is running.*nothing was restored"):
            restored(path)
        assert Project.objects.filter(pk=later.pk).exists()  # nothing changed
        held.set()
        assert [e.type for e in events][-1] == "DONE"

    assert_history_valid(stored_history(conversation))
    assert not Conversation.objects.running().exists()
    restored(path)
    assert not Project.objects.filter(pk=later.pk).exists()
