"""Storage hygiene: a full disk leaves nothing half made, and what crashes left is cleaned.

The disk-full tests run on a real 2 MiB filesystem (a tmpfs, mounted for the test) holding
ROJO_STORAGE_DIR: the errors are the kernel's ENOSPC, not a patched function's.
"""

import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.core.management import call_command

from roject.storage import (
    DiskFull,
    StorageError,
    leftovers,
    project_root_create,
    room,
    snapshot_take,
    write_project_file,
)
from roject.storage import entries as storage_entries
from rojos.models import FileChange, default_tools
from tests.storage.test_storage_race import Swapper
from tests.support.big_results import BIG as BIG_RESULT
from tests.support.fake_provider import stream, text_chunks, tool_call_chunks
from tests.support.helpers import assert_history_valid, make_rojo, stored_history
from tests.support.small_disk import small_disk_mounted

MIB = 1024 * 1024
BIG = "x" * (MIB - 1024)  # under the 1 MiB write limit, about half the small disk


@pytest.fixture
def small_disk(tmp_path, settings):
    """ROJO_STORAGE_DIR on a 2 MiB tmpfs of its own, unmounted after the test."""
    with small_disk_mounted(tmp_path) as mount:
        settings.ROJO_STORAGE_DIR = mount / "storage"
        settings.ROJO_STORAGE_DIR.mkdir()
        yield settings.ROJO_STORAGE_DIR


def undo_entries(storage: Path, project_id: int) -> list[str]:
    undo = storage / str(project_id) / "undo"
    return sorted(p.name for p in undo.iterdir()) if undo.exists() else []


def free_bytes(path: Path) -> int:
    fs = os.statvfs(path)
    return fs.f_bavail * fs.f_frsize


def test_a_snapshot_that_would_not_fit_is_refused_before_a_byte_is_written(small_disk):
    """A 1 MB file cannot be copied aside on a disk with about 1 MB free: the snapshot is
    refused with the disk-full error, writes nothing, and a 2 KB write still fits after."""
    root = project_root_create(1)
    write_project_file(root, "big.txt", BIG)
    (small_disk / "1" / "undo").mkdir(mode=0o700)
    free_before = free_bytes(small_disk)

    with pytest.raises(DiskFull, match=r"No space left on device: 'big\.txt'.*storage is full"):
        snapshot_take(1, root, ["big.txt"])

    assert undo_entries(small_disk, 1) == []
    assert free_bytes(small_disk) == free_before
    write_project_file(root, "small.txt", "y" * 2048)
    assert (root / "small.txt").read_text() == "y" * 2048


def test_a_snapshot_cut_off_by_a_full_disk_leaves_no_partial_copy(small_disk, monkeypatch):
    """When the disk fills up during the copy anyway (another writer took the space after
    the check), the kernel's ENOSPC removes the partial copy: undo/ is left empty."""
    root = project_root_create(1)
    write_project_file(root, "big.txt", BIG)
    write_project_file(root, "filler.txt", "f" * 600 * 1024)
    monkeypatch.setattr(room, "MARGIN_BYTES", -MIB)  # the check passes, the copy cannot

    with pytest.raises(DiskFull, match=r"No space left on device"):
        snapshot_take(1, root, ["big.txt"])

    assert undo_entries(small_disk, 1) == []
    write_project_file(root, "small.txt", "y" * 2048)


def test_a_write_that_does_not_fit_leaves_no_temporary_file(small_disk):
    """A write bigger than the space left fails with the disk-full error; the old file is
    whole and no temporary file is left beside it."""
    root = project_root_create(1)
    write_project_file(root, "big.txt", BIG)
    write_project_file(root, "notes.txt", "old")

    with pytest.raises(DiskFull, match=r"No space left on device: 'notes\.txt'"):
        write_project_file(root, "notes.txt", BIG + "more")

    assert sorted(p.name for p in root.iterdir()) == ["big.txt", "notes.txt"]
    assert (root / "notes.txt").read_text() == "old"


@pytest.mark.django_db(transaction=True)
def test_a_rojo_overwriting_a_file_on_a_full_disk_is_refused_and_changes_nothing(
    small_disk, fake_provider, client_for, users, project, settings
):
    """Through the chat: the overwrite whose undo copy would not fit is not run; the model
    gets the disk-full error, the file and undo/ are as before, and the next small write of
    the conversation works (and can be undone)."""
    settings.ROJO_PROVIDER_RETRIES = 0
    rojo = make_rojo(fake_provider.base_url, tools=default_tools(), approval_tools=[])
    root = project_root_create(project.pk)
    write_project_file(root, "big.txt", BIG)
    editor = client_for(users["editor"])
    overwrite = ("write_text_content", {"path": "big.txt", "text": "replaced"})
    small = ("write_text_content", {"path": "small.txt", "text": "z" * 2048})
    fake_provider.add(stream(*tool_call_chunks([overwrite])), stream(*text_chunks("Tried.")))
    fake_provider.add(stream(*tool_call_chunks([small])), stream(*text_chunks("Done.")))

    first = editor.chat(project.pk, rojo=rojo.slug, message="Replace it")
    [refused] = [e.data for e in first if e.type == "TOOL_RESULT"]
    conversation = next(e.data["conversation"] for e in first if e.type == "START")
    second = editor.chat(project.pk, rojo=rojo.slug, message="Small", conversation=conversation)

    assert refused["ok"] is False
    assert "No space left on device: 'big.txt'" in refused["result"]["error"]
    assert (root / "big.txt").read_text() == BIG
    [written] = [e.data for e in second if e.type == "TOOL_RESULT"]
    assert written["ok"] is True
    assert (root / "small.txt").read_text() == "z" * 2048
    # Only the small write is recorded; it made a new file, so it needs no copy.
    assert list(FileChange.objects.values_list("paths", "before")) == [(["small.txt"], [False])]
    assert undo_entries(small_disk, project.pk) == []


@pytest.mark.django_db(transaction=True)
def test_a_result_too_big_to_hand_over_and_to_keep_on_a_full_disk_is_its_head(
    small_disk, big_search, fake_provider, client_for, users, project, settings
):
    """A 3 MB result, over the read limit, that the full disk cannot keep for read_result:
    the model gets its head and why the rest is not there, the turn goes on, and no part of
    the result is left on the disk. Before, the call was answered `interrupted` and the
    turn ended with an internal error."""
    settings.ROJO_PROVIDER_RETRIES = 0
    rojo = make_rojo(fake_provider.base_url, tools=["big_search"])
    fake_provider.add(
        stream(*tool_call_chunks([("big_search", {})])), stream(*text_chunks("Narrowing."))
    )

    events = client_for(users["editor"]).chat(project.pk, rojo=rojo.slug, message="Find it")

    assert [e.type for e in events] == ["START", "TOOL_CALL", "TOOL_RESULT", "CHAT", "DONE"]
    [result] = [e.data for e in events if e.type == "TOOL_RESULT"]
    assert result["ok"] is True and set(result["result"]) == {"head", "size", "note"}
    assert result["result"]["head"] == BIG_RESULT[: 16 * 1024]
    assert "could not be kept" in result["result"]["note"]
    assert "No space left on device" in result["result"]["note"]
    told = json.loads(fake_provider.requests[-1]["messages"][-1]["content"])
    assert told == result["result"]
    history = stored_history(events[0].data["conversation"])
    assert_history_valid(history)
    assert history[-1].content == "Narrowing."
    kept = small_disk / str(project.pk) / "results"
    assert [p for p in kept.rglob("*") if p.is_file()] == []


def test_a_snapshot_is_made_under_a_temporary_name_and_renamed_once_complete(
    storage_dir, monkeypatch
):
    """While its copies are made, the snapshot's own directory does not exist: a crash then
    leaves a temporary entry, which no undo reads as a snapshot."""
    root = project_root_create(1)
    (root / "a.txt").write_text("a")
    (root / "b.txt").write_text("b")
    seen = []
    copy = storage_entries.entry_copy

    def watching_copy(*args, **kwargs):
        seen.append(undo_entries(storage_dir, 1))
        return copy(*args, **kwargs)

    monkeypatch.setattr("roject.storage.snapshots.entry_copy", watching_copy)
    snapshot = snapshot_take(1, root, ["a.txt", "b.txt"])

    assert len(seen) == 2
    assert all(len(names) == 1 and names[0].startswith(".rojo-") for names in seen)
    assert seen[0] == seen[1] and snapshot.key not in seen[0]
    assert undo_entries(storage_dir, 1) == [snapshot.key]
    assert sorted(p.name for p in snapshot.directory.iterdir()) == ["0", "1"]


def crash_leftovers(storage: Path, project_id: int) -> dict[str, Path]:
    """What killed processes leave: a partial snapshot, and a write's temporary file."""
    root = project_root_create(project_id)
    undo = storage / str(project_id) / "undo"
    undo.mkdir(mode=0o700, exist_ok=True)
    partial = undo / ".rojo-0123456789abcdef0123456789abcdef.tmp"
    partial.mkdir(mode=0o700)
    (partial / "0").write_bytes(b"")  # the 0-byte copy a full disk left
    (root / "docs").mkdir()
    temp = root / "docs" / ".rojo-fedcba9876543210fedcba9876543210.tmp"
    temp.write_text("half a wr")
    complete = snapshot_take(project_id, root, ["docs"])
    return {"partial": partial, "temp": temp, "complete": complete.directory}


def test_the_first_use_of_a_project_removes_partial_snapshots_once(storage_dir, monkeypatch):
    """A process cleans a project's undo/ the first time it uses the project: the partial
    snapshot goes, complete ones stay; later uses do not look again."""
    left = crash_leftovers(storage_dir, 1)
    monkeypatch.setattr(leftovers, "_cleaned", set())

    project_root_create(1)
    left["partial"].mkdir()  # as if another crash happened later
    project_root_create(1)

    assert left["partial"].exists() and not any(left["partial"].iterdir())
    assert left["complete"].is_dir()
    # A first use lists undo/ only: roots are walked by the start-up sweep and the command.
    assert left["temp"].exists()


def test_a_server_process_sweeps_every_project_as_it_starts(storage_dir, server_process):
    """A server process starting after a crash removes, without any request, the partial
    snapshots and the temporary files of cut-off writes of every project; complete
    snapshots and the projects' files stay."""
    left = [crash_leftovers(storage_dir, project_id) for project_id in (1, 2)]
    (project_root_create(2) / "docs" / "kept.txt").write_text("k")

    server_process()

    deadline = time.monotonic() + 10
    while any(p["partial"].exists() or p["temp"].exists() for p in left):
        assert time.monotonic() < deadline, "the leftovers were not removed at start-up"
        time.sleep(0.05)
    assert all(p["complete"].is_dir() for p in left)
    assert (storage_dir / "2" / "root" / "docs" / "kept.txt").read_text() == "k"


def test_a_project_changing_files_now_is_cleaned_at_a_later_use(storage_dir, monkeypatch):
    """While another holds the project's change lock, nothing is removed (it may be taking
    that snapshot now); the next use, once the lock is free, cleans."""
    import fcntl

    from roject.storage import change_lock_open

    left = crash_leftovers(storage_dir, 1)
    monkeypatch.setattr(leftovers, "_cleaned", set())
    held = change_lock_open(1)
    fcntl.flock(held, fcntl.LOCK_EX)
    try:
        project_root_create(1)
        assert left["partial"].exists()
    finally:
        os.close(held)
    project_root_create(1)
    assert not left["partial"].exists()


@pytest.mark.django_db
def test_storage_cleanup_prints_and_removes_what_crashes_left(
    storage_dir, project, tmp_path, monkeypatch
):
    """`manage.py storage_cleanup --dry-run` lists the partial snapshot, the temporary file,
    the old snapshot no record names and a dead re-run's scratch copy, removing nothing;
    without --dry-run it removes exactly those. The scratch copy is in a temporary directory
    of the test's own: a server process another test starts sweeps the machine's."""
    monkeypatch.setattr(leftovers.tempfile, "tempdir", str(tmp_path / "temp"))
    (tmp_path / "temp").mkdir()
    left = crash_leftovers(storage_dir, project.pk)
    root = project_root_create(project.pk)
    (root / "kept.txt").write_text("k")
    recorded = snapshot_take(project.pk, root, ["kept.txt"])
    FileChange.objects.create(
        project=project, tool="write_text_content", paths=["kept.txt"], before=[True], after=[],
        key=recorded.key,
    )  # fmt: skip
    hour_ago = time.time() - leftovers.UNRECORDED_SECONDS - 60
    os.utime(left["complete"], (hour_ago, hour_ago))
    young = snapshot_take(project.pk, root, ["kept.txt"]).directory  # maybe being recorded
    dead = subprocess.Popen(["true"])
    dead.wait()
    scratch = Path(leftovers.tempfile.gettempdir()) / f"rojo-rerun-{dead.pid}-abc"
    scratch.mkdir()
    expected = [
        str(p.relative_to(storage_dir)) for p in (left["partial"], left["complete"], left["temp"])
    ]

    out = io.StringIO()
    call_command("storage_cleanup", "--dry-run", stdout=out)
    assert out.getvalue().splitlines() == [
        *[f"would remove {path}" for path in expected],
        f"would remove {scratch}",
        "4 entries would be removed",
    ]
    assert all(p.exists() for p in left.values()) and scratch.exists()

    out = io.StringIO()
    call_command("storage_cleanup", stdout=out)
    assert out.getvalue().splitlines()[-1] == "4 entries removed"
    assert not any(p.exists() for p in [*left.values(), scratch])
    assert recorded.directory.is_dir() and young.is_dir()
    assert (root / "kept.txt").read_text() == "k"


@pytest.mark.django_db
def test_storage_cleanup_removes_the_copy_of_an_undone_change_a_crash_left(storage_dir, project):
    """A crash between marking an undo done and discarding its copy leaves undo/<key>/ named
    by a record that no longer needs it (an undone change is neither undone again nor
    restored from): storage_cleanup removes it once old, and keeps a live change's copy."""
    from django.utils import timezone

    root = project_root_create(project.pk)
    (root / "notes.txt").write_text("n")
    copies = {}
    for name, undone in (("undone", timezone.now()), ("live", None)):
        snapshot = snapshot_take(project.pk, root, ["notes.txt"])
        FileChange.objects.create(
            project=project, tool="write_text_content", paths=["notes.txt"], before=[True],
            after=[], key=snapshot.key, undone=undone,
        )  # fmt: skip
        hour_ago = time.time() - leftovers.UNRECORDED_SECONDS - 60
        os.utime(snapshot.directory, (hour_ago, hour_ago))
        copies[name] = snapshot.directory

    out = io.StringIO()
    call_command("storage_cleanup", stdout=out)

    assert out.getvalue().splitlines() == [
        f"removed {copies['undone'].relative_to(storage_dir)}",
        "1 entry removed",
    ]
    assert not copies["undone"].exists() and copies["live"].is_dir()


def test_the_sweep_removes_in_the_directory_it_listed_not_one_swapped_in(
    storage_dir, tmp_path, monkeypatch
):
    """A directory swapped for a link to outside after the sweep found a temporary file in
    it: the sweep removes the file in the directory it listed (moved aside, still in the
    root), not the file of the same name the link now leads to."""
    root = project_root_create(1)
    name = ".rojo-" + "0" * 32 + ".tmp"
    (root / "d").mkdir()
    (root / "d" / name).write_text("half a wr")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / name).write_text("SECRET\n")
    found = leftovers.is_temp_file

    def swapping(entry: str) -> bool:
        if entry == name and (root / "d").is_dir() and not (root / "d").is_symlink():
            (root / "d").rename(root / "moved")
            (root / "d").symlink_to(outside, target_is_directory=True)
        return found(entry)

    monkeypatch.setattr(leftovers, "is_temp_file", swapping)

    removed = leftovers.project_leftovers_remove(1, whole_root=True)

    assert removed == [f"1/root/d/{name}"]
    assert (outside / name).read_text() == "SECRET\n"
    assert not (root / "moved" / name).exists()


def test_the_sweep_deletes_nothing_outside_a_directory_swapped_again_and_again(tmp_path):
    """The sweep removes a write's temporary file over and over while another process swaps
    its directory with a link to outside (the race tests' swapper): it removes the one in
    the root when it finds it, and never the one of the same name outside (the sweep that
    listed by path and removed by path later deleted it in about one round in a hundred)."""
    root = project_root_create(7)
    (root / "d").mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "swap").symlink_to(outside, target_is_directory=True)
    name = ".rojo-" + "0" * 32 + ".tmp"
    real = os.open(root / "d", os.O_RDONLY | os.O_DIRECTORY)
    deleted_outside = removed = 0
    try:
        with Swapper(root):
            for _ in range(3000):
                os.close(os.open(name, os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=real))
                if not (outside / name).exists():
                    (outside / name).write_text("SECRET\n")
                leftovers.project_leftovers_remove(7, whole_root=True)
                if not (outside / name).exists():
                    deleted_outside += 1
                removed += name not in os.listdir(real)
    finally:
        os.close(real)
    assert deleted_outside == 0
    assert removed > 0  # the walk reached `d` between swaps


# A restore that stages a project's storage, says where, and waits to be killed.
_RESTORE = """
import io, sys, time
from django.conf import settings
settings.configure(ROJO_STORAGE_DIR=sys.argv[1])
from roject.storage.backups import StoredEntry
from roject.storage.staging import StorageStaging
staging = StorageStaging()
staging.entry_place(1, StoredEntry(path="root", kind="dir", mode=0o755, mtime=0), None)
private = StoredEntry(path="root/private.txt", kind="file", mode=0o644, mtime=0, size=7)
staging.entry_place(1, private, io.BytesIO(b"SECRET\\n"))
print(staging.directory.name, flush=True)
time.sleep(60)
"""


@pytest.mark.django_db
def test_the_staging_of_a_killed_restore_is_removed_and_a_running_ones_kept(storage_dir):
    """A restore killed with SIGKILL leaves its staging directory (the archive's files):
    the start-up sweep and `storage_cleanup` remove it, and leave alone, while it runs, the
    one of a restore in another process, and the projects' storage a restore set aside."""
    restore = subprocess.Popen(
        [sys.executable, "-c", _RESTORE, str(storage_dir)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[2],  # this checkout's roject
    )
    try:
        staging = storage_dir / restore.stdout.readline().strip()
        assert (staging / "1" / "root" / "private.txt").is_file()
        aside = storage_dir / ".rojo-0123456789abcdef0123456789abcdef.tmp"
        (aside / "root").mkdir(parents=True)

        assert leftovers.storage_sweep() == 0
        out = io.StringIO()
        call_command("storage_cleanup", stdout=out)
        assert out.getvalue().splitlines() == ["0 entries removed"]
        assert (staging / "1" / "root" / "private.txt").is_file()
    finally:
        restore.kill()
        restore.wait()

    out = io.StringIO()
    call_command("storage_cleanup", "--dry-run", stdout=out)
    assert out.getvalue().splitlines() == [
        f"would remove {staging.name}",
        "1 entry would be removed",
    ]
    assert staging.is_dir()
    assert leftovers.storage_sweep() == 1
    assert not staging.exists() and (aside / "root").is_dir()


def test_a_write_over_the_full_disk_error_reads_like_the_snapshot_refusal(root, monkeypatch):
    """The tools' disk-full error and the snapshot's refusal are the same sentence."""

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(StorageError) as raised:
        write_project_file(root, "a.txt", "text")
    assert str(raised.value) == (
        "No space left on device: 'a.txt' (the server's storage is full; nothing was changed)"
    )


@pytest.mark.django_db
def test_old_incoming_leftovers_are_removed_at_first_use_and_by_the_command(
    storage_dir, project, monkeypatch
):
    """An upload or unpacked directory left in incoming/ over an hour ago is removed at
    the project's first use in a process and by `manage.py storage_cleanup`; a young one
    (an upload being received now) is kept."""
    incoming = storage_dir / str(project.pk) / "incoming"
    incoming.mkdir(parents=True)
    hour_ago = time.time() - leftovers.INCOMING_SECONDS - 60
    old_dir, old_file, young = (incoming / (c * 32) for c in "abc")
    old_dir.mkdir()
    (old_dir / "part.txt").write_text("half")
    old_file.write_bytes(b"zip")
    young.write_bytes(b"now")
    for path in (old_dir, old_file):
        os.utime(path, (hour_ago, hour_ago))
    monkeypatch.setattr(leftovers, "_cleaned", set())
    project_root_create(project.pk)
    assert sorted(p.name for p in incoming.iterdir()) == [young.name]

    old_file.write_bytes(b"zip")
    os.utime(old_file, (hour_ago, hour_ago))
    out = io.StringIO()
    call_command("storage_cleanup", stdout=out)
    assert f"removed {old_file.relative_to(storage_dir)}" in out.getvalue().splitlines()
    assert sorted(p.name for p in incoming.iterdir()) == [young.name]


@pytest.mark.django_db
def test_a_cut_off_write_of_an_attached_file_is_removed_once_old(storage_dir, project):
    """An image or PDF write cut off by a killed process leaves its temporary file in images/
    or pdfs/: `manage.py storage_cleanup` removes one over an hour old, and keeps a young
    one (a write now) and every kept file."""
    from roject.storage.entries import temp_name

    images, pdfs = (storage_dir / str(project.pk) / part for part in ("images", "pdfs"))
    images.mkdir(parents=True)
    pdfs.mkdir()
    hour_ago = time.time() - leftovers.INCOMING_SECONDS - 60
    old, young = images / temp_name(), pdfs / temp_name()
    kept = images / ("a" * 64)
    for path in (old, young, kept):
        path.write_bytes(b"bytes")
    os.utime(old, (hour_ago, hour_ago))
    os.utime(kept, (hour_ago, hour_ago))
    out = io.StringIO()
    call_command("storage_cleanup", stdout=out)
    assert f"removed {old.relative_to(storage_dir)}" in out.getvalue().splitlines()
    assert sorted(images.iterdir()) == [kept]
    assert sorted(pdfs.iterdir()) == [young]


@pytest.mark.django_db
def test_images_and_pdfs_uploaded_but_never_sent_go_after_a_day(storage_dir, project, users):
    """`storage_cleanup` removes a kept image or PDF no message refers to once a day old; one
    a message shows, a young upload (waiting in a message box) and one kept again today
    stay; `--dry-run` removes nothing."""
    from roject.storage import image_keep, pdf_keep
    from rojos.management.commands.storage_cleanup import UNSENT_SECONDS
    from rojos.models import Conversation, Message
    from rojos.selftest.asks import red_square_png
    from tests.support.pdfs import pdf_file

    png, big = red_square_png(), 10**7
    shown = image_keep(project_id=project.pk, data=png, max_bytes=big).sha256
    unsent_pdf = pdf_keep(project_id=project.pk, data=pdf_file(["one page"]), max_bytes=big)
    young = pdf_keep(project_id=project.pk, data=pdf_file(["another"]), max_bytes=big)
    conversation = Conversation.objects.create(project=project, user=users["editor"])
    Message.objects.create(
        conversation=conversation, position=0, role="user", content="See",
        extra={"images": [{"sha256": shown, "type": "image/png", "size": len(png)}]},
    )  # fmt: skip
    day_ago = time.time() - UNSENT_SECONDS - 60
    kept = storage_dir / str(project.pk)
    for path in (kept / "images" / shown, kept / "pdfs" / unsent_pdf):
        os.utime(path, (day_ago, day_ago))

    out = io.StringIO()
    call_command("storage_cleanup", "--dry-run", stdout=out)
    assert f"would remove {project.pk}/pdfs/{unsent_pdf}" in out.getvalue().splitlines()
    assert (kept / "pdfs" / unsent_pdf).exists()

    call_command("storage_cleanup", stdout=io.StringIO())
    assert sorted(p.name for p in (kept / "pdfs").iterdir()) == [young]
    assert sorted(p.name for p in (kept / "images").iterdir()) == [shown]

    os.utime(kept / "pdfs" / young, (day_ago, day_ago))
    pdf_keep(project_id=project.pk, data=pdf_file(["another"]), max_bytes=big)  # again today
    call_command("storage_cleanup", stdout=io.StringIO())
    assert sorted(p.name for p in (kept / "pdfs").iterdir()) == [young]
