"""Modes that do not depend on the server's umask: files 0644, directories 0755, the undo
copies in 0700 directories, the lock file 0600, under umask 000 (which would give 0666 and
0777) as under 077 (0600 and 0700)."""

import os
import stat
from pathlib import Path

import pytest

from roject import storage
from rojos.models import FileChange, default_tools
from rojos.tools import registry
from tests.support.fake_provider import stream, text_chunks, tool_call_chunks
from tests.support.helpers import context, make_rojo

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(params=[0o000, 0o077], ids=["umask-000", "umask-077"])
def umask(request):
    previous = os.umask(request.param)
    yield request.param
    os.umask(previous)


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def modes(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): mode(p) for p in sorted(root.rglob("*"))}


async def test_tools_make_files_0644_and_directories_0755(umask, tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    ctx = context(root)
    (root / "own.sh").write_text("echo\n")
    (root / "own.sh").chmod(0o750)
    (root / "keep.txt").write_text("keep\n")
    (root / "keep.txt").chmod(0o640)

    for tool, args in [
        ("write_text_content", {"path": "a/b/new.txt", "text": "new\n"}),
        ("write_text_content", {"path": "own.sh", "text": "echo hi\n"}),
        ("create_directory", {"path": "x/y"}),
        ("move_path", {"source": "keep.txt", "destination": "m/n/keep.txt"}),
        (
            "edit_text_content",
            {"path": "a/b/new.txt", "edits": [{"old_text": "new", "new_text": "edited"}]},
        ),
    ]:
        result = await registry.execute(tool, args, ctx)
        assert "error" not in result, result

    assert modes(root) == {
        "a": 0o755,
        "a/b": 0o755,
        "a/b/new.txt": 0o644,
        "m": 0o755,
        "m/n": 0o755,
        "m/n/keep.txt": 0o640,  # moved, not made: it keeps the mode it had
        "own.sh": 0o750,  # a file written over keeps its mode
        "x": 0o755,
        "x/y": 0o755,
    }


def test_the_storage_of_a_new_project_is_0755_and_its_lock_0600(umask, settings, tmp_path):
    """ROJO_STORAGE_DIR itself too, when the app makes it."""
    settings.ROJO_STORAGE_DIR = tmp_path / "fresh" / "storage"

    root = storage.project_root_create(41)
    os.close(storage.change_lock_open(41))

    assert [mode(p) for p in (tmp_path / "fresh", settings.ROJO_STORAGE_DIR)] == [0o755, 0o755]
    assert mode(root.parent) == mode(root) == 0o755
    assert mode(root.parent / "changes.lock") == 0o600 & ~umask


def test_a_turn_and_its_undo_keep_the_modes_whatever_the_umask(
    umask, client_for, users, project, fake_provider, settings
):
    """The undo copies are private (0700 directories); what an undo puts back has the modes it
    had, and the directories it makes again are 0755."""
    settings.ROJO_PROVIDER_RETRIES = 0
    root = storage.project_root_create(project.pk)
    (root / "docs" / "guide").mkdir(parents=True)
    (root / "docs" / "guide" / "setup.md").write_text("Install it.\n")
    (root / "docs" / "run.sh").write_text("echo\n")
    for path, bits in [("docs", 0o755), ("docs/guide", 0o755), ("docs/guide/setup.md", 0o644)]:
        (root / path).chmod(bits)
    (root / "docs" / "run.sh").chmod(0o700)
    before = modes(root)
    rojo = make_rojo(
        fake_provider.base_url, tools=[*default_tools(), "delete_path"], approval_tools=[]
    )
    fake_provider.add(
        stream(*tool_call_chunks([("delete_path", {"path": "docs", "recursive": True})])),
        stream(*text_chunks("Done.")),
    )
    editor = client_for(users["editor"])

    events = editor.chat(project.pk, rojo=rojo.slug, message="Clean up")

    assert not (root / "docs").exists()
    [change] = FileChange.objects.all()
    undo = storage.undo_dir(project.pk, change.key)
    assert [mode(undo.parent), mode(undo)] == [0o700, 0o700]
    assert modes(undo) == {
        "0": 0o755,
        "0/guide": 0o755,
        "0/guide/setup.md": 0o644,
        "0/run.sh": 0o700,
    }
    assert [e.type for e in events][-1] == "DONE"

    assert editor.post(f"/api/changes/{change.pk}/undo").status_code == 200
    assert modes(root) == before
