"""Hard links: a file with other links may be a window onto a file outside the project (another
project's, the server's), so the gate neither reads nor changes it, whatever reaches it.

The check is made on the opened descriptor (fstat), so a link made after a path was looked at
is caught too. Each attack goes through a real entry point: a tool call, the files API, a turn.
"""

import io
import os
from pathlib import Path

import pytest
from django.core.management import call_command

from roject import storage
from roject.storage import project_root_create
from rojos.models import FileChange, default_tools
from rojos.tools import registry
from tests.backup.archive_contents import archive_contents
from tests.support.fake_provider import stream, text_chunks, tool_call_chunks
from tests.support.helpers import context, error_message, make_rojo

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "SECRET of another project\n"


def refusal(label: str) -> str:
    return (
        f"{label!r} has other hard links, so it may also be a file outside the project; "
        "it is not read or changed here (a copy of it, made by a person, would be)"
    )


@pytest.fixture
def linked(project, tmp_path) -> tuple[Path, Path]:
    """The project's root with `a.txt` and `docs/b.txt`, both hard links to a file outside."""
    root = project_root_create(project.pk)
    secret = tmp_path / "outside" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text(SECRET)
    os.link(secret, root / "a.txt")
    (root / "docs").mkdir()
    os.link(secret, root / "docs" / "b.txt")
    (root / "plain.txt").write_text("plain\n")
    return root, secret


def undo_copies(project) -> list[Path]:
    undo = storage.undo_dir(project.pk, "0" * 32).parent
    return sorted(undo.rglob("*")) if undo.exists() else []


def untouched(secret: Path, before: os.stat_result) -> bool:
    now = os.stat(secret)
    return secret.read_text() == SECRET and (now.st_ino, now.st_nlink, now.st_mtime_ns) == (
        before.st_ino,
        before.st_nlink,
        before.st_mtime_ns,
    )


CALLS = {
    "read": ("get_text_content", {"path": "a.txt"}, "a.txt"),
    "read in parts": ("get_text_content", {"path": "a.txt", "offset": 1, "limit": 1}, "a.txt"),
    "write over it": ("write_text_content", {"path": "a.txt", "text": "mine\n"}, "a.txt"),
    "edit": (
        "edit_text_content",
        {"path": "a.txt", "edits": [{"old_text": "SECRET", "new_text": "mine"}]},
        "a.txt",
    ),
    "move it": ("move_path", {"source": "a.txt", "destination": "moved.txt"}, "a.txt"),
    "move a file over it": (
        "move_path",
        {"source": "plain.txt", "destination": "a.txt", "overwrite": True},
        "a.txt",
    ),
    "move the directory holding one": (
        "move_path",
        {"source": "docs", "destination": "moved"},
        "docs/b.txt",
    ),
    "look at it": ("read_path_meta", {"path": "a.txt"}, "a.txt"),  # another file's size, time
    "delete it": ("delete_path", {"path": "a.txt"}, "a.txt"),
    "delete the directory holding one": (
        "delete_path",
        {"path": "docs", "recursive": True},
        "docs/b.txt",
    ),
}


@pytest.mark.parametrize(("tool", "args", "label"), CALLS.values(), ids=CALLS.keys())
async def test_a_tool_call_on_a_hard_linked_file_is_refused(linked, tool, args, label):
    root, secret = linked
    before = os.stat(secret)
    names = sorted(p.name for p in root.rglob("*"))

    result = await registry.execute(tool, args, context(root))

    assert error_message(result) == refusal(label)
    assert untouched(secret, before)
    assert sorted(p.name for p in root.rglob("*")) == names
    assert (root / "plain.txt").read_text() == "plain\n"


async def test_a_search_skips_hard_linked_files(linked):
    root, _ = linked
    result = await registry.execute("search_text", {"path": "", "query": "SECRET"}, context(root))
    assert result == {"matches": [], "cut": False}


async def test_a_file_is_read_again_once_its_other_link_is_gone(linked):
    """It is the link count that is refused, nothing else about the file."""
    root, secret = linked
    secret.unlink()
    os.unlink(root / "docs" / "b.txt")
    result = await registry.execute("get_text_content", {"path": "a.txt"}, context(root))
    assert result == SECRET


def test_the_files_api_does_not_show_a_hard_linked_file(linked, client_for, users, project):
    client = client_for(users["viewer"])
    answer = client.get(f"/api/projects/{project.pk}/files/content", params={"path": "a.txt"})
    assert answer.status_code == 400
    assert answer.json() == {"detail": refusal("a.txt")}
    assert "SECRET" not in answer.text


def test_a_turn_that_deletes_a_hard_linked_file_changes_nothing_and_records_nothing(
    linked, client_for, users, project, fake_provider, settings
):
    """Its undo copy would be a copy of what may be another project's file: neither is made."""
    root, secret = linked
    before = os.stat(secret)
    settings.ROJO_PROVIDER_RETRIES = 0
    rojo = make_rojo(
        fake_provider.base_url, tools=[*default_tools(), "delete_path"], approval_tools=[]
    )
    fake_provider.add(
        stream(*tool_call_chunks([("delete_path", {"path": "docs", "recursive": True})])),
        stream(*text_chunks("Done.")),
    )

    events = client_for(users["editor"]).chat(project.pk, rojo=rojo.slug, message="Clean up")

    [result] = [e.data for e in events if e.type == "TOOL_RESULT"]
    assert result["ok"] is False
    undo_note = "; nothing was changed: no copy of it could be kept for undo"
    assert result["result"] == {"error": refusal("docs/b.txt") + undo_note}
    assert FileChange.objects.count() == 0
    assert untouched(secret, before)
    assert (root / "docs" / "b.txt").read_text() == SECRET
    assert undo_copies(project) == []


def test_an_undo_snapshot_does_not_copy_a_hard_linked_file(linked, project):
    root, _ = linked
    with pytest.raises(storage.StorageError) as refused:
        storage.snapshot_take(project.pk, root, ["plain.txt", "docs"])
    assert str(refused.value) == refusal("docs/b.txt")
    assert undo_copies(project) == []


def test_a_scratch_copy_leaves_hard_linked_files_out(linked):
    """In the copy the file would have one link, and be read as the project's own."""
    root, _ = linked
    with storage.scratch_copy(root) as copy:
        copied = sorted(str(p.relative_to(copy)) for p in copy.rglob("*"))
    assert copied == ["docs", "plain.txt"]


def test_a_backup_leaves_hard_linked_files_out(linked, project, tmp_path):
    """Restored, such a file would have one link and be read as the project's own."""
    path = tmp_path / "backup.tar"
    call_command("backup", str(path), stdout=io.StringIO())

    _, files = archive_contents(path)

    held = sorted(name for project_id, name in files if project_id == project.pk)
    assert held == ["root", "root/docs", "root/plain.txt"]
