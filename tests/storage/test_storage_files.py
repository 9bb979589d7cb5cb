"""Reading, writing, listing and creating files in a project root through the storage gate."""

import json
import os
import re
import stat
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest

from roject import storage
from roject.storage import (
    PathError,
    StorageError,
    create_directory,
    list_directory,
    path_meta,
    read_project_file,
    temp_files_remove,
    write_project_file,
)
from rojos.agent.changing_calls import cut_off_writes_clean
from rojos.tools import registry
from tests.support.storage_resolvers import RESOLVERS, resolver_use


@pytest.fixture(autouse=True, params=RESOLVERS)
def resolver(request, monkeypatch) -> str:
    """Every test here runs on openat2 and on the walk that replaces it."""
    return resolver_use(request.param, monkeypatch)


ISO_UTC_Z = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{6})?Z$")


def temp_files(directory: Path) -> list[str]:
    return [p.name for p in directory.iterdir() if p.name.startswith(".rojo-")]


def open_fd_count() -> int:
    return len(os.listdir("/proc/self/fd"))


# Writing


def test_write_creates_file_with_text(root):
    """A new file holds exactly the UTF-8 encoding of the text."""
    write_project_file(root, "notes.md", "héllo\n")
    assert (root / "notes.md").read_bytes() == "héllo\n".encode()


def test_write_creates_missing_parents(root):
    """Parent directories inside the root are created on the way."""
    write_project_file(root, "a/b/c/notes.md", "deep")
    assert (root / "a" / "b" / "c" / "notes.md").read_text() == "deep"


def test_write_replaces_whole_content(root):
    """Writing over a longer file leaves only the new text, not a tail of the old one."""
    (root / "notes.md").write_text("a long old content")
    write_project_file(root, "notes.md", "new")
    assert (root / "notes.md").read_text() == "new"


def test_write_leaves_no_temp_file_behind(root):
    """After a successful write the directory holds the target and nothing else."""
    write_project_file(root, "notes.md", "text")
    assert [p.name for p in root.iterdir()] == ["notes.md"]


def test_new_file_is_world_readable_not_private_temp_mode(root):
    """A new file gets 0644, not the 0600 of the temporary file it was renamed from."""
    write_project_file(root, "notes.md", "text")
    assert stat.S_IMODE((root / "notes.md").stat().st_mode) == 0o644


def test_existing_file_keeps_its_mode(root):
    """Replacing a file keeps the permissions it had."""
    target = root / "run.sh"
    target.write_text("old")
    target.chmod(0o750)
    write_project_file(root, "run.sh", "new")
    assert stat.S_IMODE(target.stat().st_mode) == 0o750


def test_write_through_inside_symlink_updates_its_target(root):
    """A symlink inside the root is followed; the link itself stays a link."""
    (root / "real.md").write_text("old")
    (root / "alias.md").symlink_to("real.md")
    write_project_file(root, "alias.md", "new")
    assert (root / "real.md").read_text() == "new"
    assert (root / "alias.md").is_symlink()


def test_write_through_an_absolute_symlink_inside_updates_its_target(root):
    """Its target named from /: followed as the read follows it (before, the write was
    refused as an absolute path the caller never gave)."""
    (root / "docs").mkdir()
    (root / "docs" / "real.md").write_text("old")
    (root / "alias.md").symlink_to(root.resolve() / "docs" / "real.md")
    (root / "top").symlink_to(root.resolve())
    write_project_file(root, "alias.md", "new")
    assert read_project_file(root, "alias.md") == "new"
    assert (root / "docs" / "real.md").read_text() == "new" and (root / "alias.md").is_symlink()
    with pytest.raises(StorageError):
        write_project_file(root, "top", "not a file")  # the root itself: a directory
    assert (root / "top").is_symlink()


@pytest.mark.parametrize("failing", ["fsync", "replace"])
def test_failed_write_keeps_old_content_and_removes_temp(root, monkeypatch, failing):
    """A failure after the temp file exists leaves the old file intact and no temp file."""
    (root / "notes.md").write_text("old content")

    def fail(*args, **kwargs):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, failing, fail)
    with pytest.raises(StorageError, match=re.escape("Input/output error: 'notes.md'")):
        write_project_file(root, "notes.md", "new content")
    monkeypatch.undo()
    assert (root / "notes.md").read_text() == "old content"
    assert temp_files(root) == []


def test_failed_write_of_new_file_leaves_nothing(root, monkeypatch):
    """A new file that could not be written does not appear, even half-written."""

    def fail(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", fail)
    with pytest.raises(StorageError, match="No space left on device"):
        write_project_file(root, "docs/new.md", "text")
    monkeypatch.undo()
    assert list((root / "docs").iterdir()) == []


def test_write_over_limit_is_refused_and_nothing_written(root, settings):
    """Text over ROJO_MAX_WRITE_BYTES is refused before any file is touched."""
    settings.ROJO_MAX_WRITE_BYTES = 10
    (root / "notes.md").write_text("old")
    with pytest.raises(StorageError, match="11 bytes, over the 10-byte write limit"):
        write_project_file(root, "notes.md", "x" * 11)
    with pytest.raises(StorageError, match="write limit"):
        write_project_file(root, "new/file.md", "x" * 11)
    assert (root / "notes.md").read_text() == "old"
    assert [p.name for p in root.iterdir()] == ["notes.md"]


def test_write_limit_counts_utf8_bytes_not_characters(root, settings):
    """Six two-byte characters are twelve bytes, over a ten-byte limit."""
    settings.ROJO_MAX_WRITE_BYTES = 10
    with pytest.raises(StorageError, match="12 bytes"):
        write_project_file(root, "notes.md", "é" * 6)
    assert not (root / "notes.md").exists()


def test_write_exactly_at_limit_is_allowed(root, settings):
    """The limit is inclusive."""
    settings.ROJO_MAX_WRITE_BYTES = 10
    write_project_file(root, "notes.md", "x" * 10)
    assert (root / "notes.md").read_text() == "x" * 10


def test_write_to_root_itself_is_refused(root):
    """The empty path names the root directory, which cannot become a file."""
    with pytest.raises(PathError, match="project root itself"):
        write_project_file(root, "", "text")
    assert root.is_dir()


def test_write_to_directory_is_refused_and_directory_kept(root):
    """A directory is not replaced by a file."""
    (root / "docs").mkdir()
    (root / "docs" / "keep.md").write_text("keep")
    with pytest.raises(StorageError, match="'docs' is a directory"):
        write_project_file(root, "docs", "text")
    assert (root / "docs" / "keep.md").read_text() == "keep"


def test_write_outside_root_is_refused_and_nothing_created(root, tmp_path):
    """An escaping path is refused before any directory is made."""
    with pytest.raises(PathError):
        write_project_file(root, "../escaped/notes.md", "text")
    assert not (tmp_path / "escaped").exists()


def test_write_through_symlink_pointing_outside_is_refused(root, tmp_path):
    """A link to an outside file is not a way to overwrite it."""
    victim = tmp_path / "victim.txt"
    victim.write_text("untouched")
    (root / "link.txt").symlink_to(victim)
    with pytest.raises(PathError):
        write_project_file(root, "link.txt", "pwned")
    assert victim.read_text() == "untouched"


@pytest.mark.parametrize("text", [None, b"bytes", 42])
def test_write_of_non_text_is_refused(root, text):
    """Only str is written; the file is not created."""
    with pytest.raises(StorageError, match="text must be a string"):
        write_project_file(root, "notes.md", text)
    assert not (root / "notes.md").exists()


# Reading


def test_read_returns_text(root):
    """A UTF-8 file comes back decoded, newlines untouched."""
    (root / "notes.md").write_bytes("línea 1\r\nline 2\n".encode())
    assert read_project_file(root, "notes.md") == "línea 1\r\nline 2\n"


def test_read_empty_file(root):
    """An empty file is the empty string."""
    (root / "empty.txt").write_bytes(b"")
    assert read_project_file(root, "empty.txt") == ""


def test_read_over_limit_is_refused_with_clear_message(root, settings):
    """A file over ROJO_MAX_READ_BYTES is refused, naming its size and the limit."""
    settings.ROJO_MAX_READ_BYTES = 10
    (root / "big.txt").write_text("x" * 11)
    with pytest.raises(StorageError) as excinfo:
        read_project_file(root, "big.txt")
    assert str(excinfo.value) == (
        "'big.txt' is 11 bytes, over the 10-byte read limit; read it in parts with offset and limit"
    )


def test_read_exactly_at_limit_is_allowed(root, settings):
    """The read limit is inclusive."""
    settings.ROJO_MAX_READ_BYTES = 10
    (root / "ok.txt").write_text("x" * 10)
    assert read_project_file(root, "ok.txt") == "x" * 10


def test_binary_file_is_refused(root):
    """A NUL byte marks a binary file, even if it happens to be valid UTF-8."""
    (root / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    with pytest.raises(StorageError, match=re.escape("'image.png' is a binary file")):
        read_project_file(root, "image.png")


def test_non_utf8_file_is_refused(root):
    """Latin-1 text is not silently mis-decoded."""
    (root / "latin1.txt").write_bytes("café".encode("latin-1"))
    with pytest.raises(StorageError, match=re.escape("'latin1.txt' is not UTF-8 text")):
        read_project_file(root, "latin1.txt")


def test_directory_is_refused(root):
    """Reading a directory is an error that says so."""
    (root / "docs").mkdir()
    with pytest.raises(StorageError, match=re.escape("'docs' is a directory, not a file")):
        read_project_file(root, "docs")


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc/self/fd")
def test_refused_reads_do_not_leak_file_descriptors(root, settings):
    """Every refusal after the open closes the descriptor it opened."""
    settings.ROJO_MAX_READ_BYTES = 4
    (root / "docs").mkdir()
    (root / "big.txt").write_text("too big")
    (root / "bin").write_bytes(b"\x00")
    before = open_fd_count()
    for name in ("docs", "big.txt", "bin") * 20:
        with pytest.raises(StorageError):
            read_project_file(root, name)
    assert open_fd_count() == before


def test_fifo_is_refused_without_hanging(root):
    """A named pipe with no writer is refused at once instead of blocking the reader."""
    os.mkfifo(root / "pipe")
    outcome: list[BaseException | str] = []

    def read_pipe():
        try:
            outcome.append(read_project_file(root, "pipe"))
        except BaseException as exc:  # handed to the test thread for the assertion
            outcome.append(exc)

    reader = threading.Thread(target=read_pipe, daemon=True)
    reader.start()
    reader.join(timeout=5)
    assert not reader.is_alive(), "reading a FIFO blocked"
    assert len(outcome) == 1
    assert isinstance(outcome[0], StorageError)
    assert str(outcome[0]) == "'pipe' is not a regular file"


def test_missing_file_is_reported_by_relative_path_only(root):
    """The message names what the caller asked for, never the server path."""
    with pytest.raises(StorageError) as excinfo:
        read_project_file(root, "nope/missing.txt")
    message = str(excinfo.value)
    assert "'nope/missing.txt'" in message
    assert str(root) not in message


def test_read_through_symlink_pointing_outside_is_refused(root, tmp_path):
    """A link to a file outside the root does not leak its content."""
    (tmp_path / "secret.txt").write_text("secret")
    (root / "link.txt").symlink_to(tmp_path / "secret.txt")
    with pytest.raises(PathError):
        read_project_file(root, "link.txt")


# Listing


def test_list_directory_sorts_by_name_and_gives_types(root):
    """Entries come sorted by code point, each typed as file or directory."""
    (root / "b.txt").write_text("b")
    (root / "a").mkdir()
    (root / "C.md").write_text("c")
    (root / "_z").mkdir()
    (root / ".hidden").write_text("h")
    assert list_directory(root, "") == [
        {"name": ".hidden", "type": "file"},
        {"name": "C.md", "type": "file"},
        {"name": "_z", "type": "directory"},
        {"name": "a", "type": "directory"},
        {"name": "b.txt", "type": "file"},
    ]


def test_list_directory_hides_in_progress_temp_files(root):
    """Temporary files of an atomic write are not listed; similar names still are."""
    (root / ".rojo-abc123.tmp").write_text("partial")
    (root / "draft.tmp").write_text("kept")
    (root / ".rojo-notes").write_text("kept")
    assert list_directory(root, ".") == [
        {"name": ".rojo-notes", "type": "file"},
        {"name": "draft.tmp", "type": "file"},
    ]


def test_list_directory_leaves_out_symlinks_pointing_outside(root, tmp_path):
    """A link out of the root is not listed, so listing reveals nothing about the outside."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "docs").mkdir()
    (root / "escape").symlink_to(outside)
    (root / "inner").symlink_to(root / "docs")
    assert list_directory(root, "") == [
        {"name": "docs", "type": "directory"},
        {"name": "inner", "type": "directory"},
    ]


def test_write_to_a_path_ending_in_slash_is_refused(root):
    """A trailing slash names a directory; nothing is written."""
    with pytest.raises(PathError, match="ends with '/'"):
        write_project_file(root, "docs/", "text")
    assert list(root.iterdir()) == []


def test_list_subdirectory_is_not_recursive(root):
    """Only the direct children of the directory are listed."""
    (root / "docs" / "deep").mkdir(parents=True)
    (root / "docs" / "deep" / "x.md").write_text("x")
    (root / "docs" / "readme.md").write_text("r")
    assert list_directory(root, "docs/") == [
        {"name": "deep", "type": "directory"},
        {"name": "readme.md", "type": "file"},
    ]


def test_list_empty_directory(root):
    """An empty directory lists as an empty list."""
    assert list_directory(root, "") == []


def test_list_file_is_refused(root):
    """Listing a file says it is a file."""
    (root / "notes.md").write_text("n")
    with pytest.raises(StorageError, match=re.escape("'notes.md' is a file, not a directory")):
        list_directory(root, "notes.md")


def test_list_missing_directory_is_refused(root):
    """Listing a missing directory names it."""
    with pytest.raises(StorageError, match="No such directory: 'nope'"):
        list_directory(root, "nope")


def test_list_outside_root_is_refused(root):
    """The parent of the root cannot be listed."""
    with pytest.raises(PathError):
        list_directory(root, "..")


# Creating directories


def test_create_directory_with_parents(root):
    """Missing parents are created too."""
    create_directory(root, "a/b/c")
    assert (root / "a" / "b" / "c").is_dir()


def test_create_existing_directory_is_fine_and_keeps_content(root):
    """Creating a directory that exists changes nothing."""
    (root / "docs").mkdir()
    (root / "docs" / "keep.md").write_text("keep")
    create_directory(root, "docs")
    assert (root / "docs" / "keep.md").read_text() == "keep"


def test_create_directory_over_existing_file_is_refused(root):
    """An existing file is neither replaced nor turned into a directory."""
    (root / "notes.md").write_text("keep")
    with pytest.raises(StorageError, match=re.escape("'notes.md' exists and is a file")):
        create_directory(root, "notes.md")
    assert (root / "notes.md").read_text() == "keep"


def test_create_directory_below_a_file_is_refused(root):
    """A file in the middle of the path makes the call fail, not crash."""
    (root / "notes.md").write_text("keep")
    with pytest.raises(StorageError, match=re.escape("'notes.md/sub'")):
        create_directory(root, "notes.md/sub")


def test_create_directory_outside_root_is_refused(root, tmp_path):
    """An escaping directory is not created."""
    with pytest.raises(PathError):
        create_directory(root, "../escaped")
    assert not (tmp_path / "escaped").exists()


# Metadata


def test_path_meta_of_file(root):
    """A file's type, byte size and mtime as ISO 8601 UTC with a Z suffix."""
    (root / "notes.md").write_text("héllo")
    os.utime(root / "notes.md", (1_700_000_000, 1_700_000_000))
    assert path_meta(root, "notes.md") == {
        "type": "file",
        "size": 6,
        "modifiedAt": "2023-11-14T22:13:20Z",
    }


def test_path_meta_keeps_sub_second_precision(root):
    """Fractional mtimes keep microseconds and still end in Z."""
    (root / "notes.md").write_text("x")
    os.utime(root / "notes.md", (1_700_000_000.5, 1_700_000_000.5))
    assert path_meta(root, "notes.md")["modifiedAt"] == "2023-11-14T22:13:20.500000Z"


@pytest.mark.parametrize("relative_path", ["", ".", "docs"])
def test_path_meta_of_directory(root, relative_path):
    """Directories, the root included, report type directory and a parseable UTC time."""
    (root / "docs").mkdir()
    meta = path_meta(root, relative_path)
    assert set(meta) == {"type", "size", "modifiedAt"}
    assert meta["type"] == "directory"
    assert isinstance(meta["size"], int)
    assert ISO_UTC_Z.match(meta["modifiedAt"])
    assert datetime.fromisoformat(meta["modifiedAt"]).tzinfo == UTC


def test_path_meta_of_missing_path_is_refused(root):
    """A missing path is a StorageError naming the relative path only."""
    with pytest.raises(StorageError, match=re.escape("'missing.md'")) as excinfo:
        path_meta(root, "missing.md")
    assert str(root) not in str(excinfo.value)


def test_project_root_is_under_storage_dir(storage_dir):
    """Project files live in ROJO_STORAGE_DIR/<id>/root, read at call time."""
    assert storage.project_root(7) == storage_dir / "7" / "root"
    created = storage.project_root_create(7)
    assert created.is_dir()
    assert storage.project_root_create(7) == created


def test_leftover_temp_files_are_removed_only_inside_the_root(tmp_path):
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / ".rojo-theirs.tmp").write_text("not ours")
    (root / "out").symlink_to(outside, target_is_directory=True)
    (root / ".rojo-a1.tmp").write_text("half")
    (root / "sub" / ".rojo-b2.tmp").write_text("half")
    (root / "sub" / ".rojo-link.tmp").symlink_to(outside / ".rojo-theirs.tmp")
    (root / "keep.tmp").write_text("a file of the user's")

    temp_files_remove(root, {".", "sub", "out", "../outside"})

    assert sorted(str(p.relative_to(root)) for p in root.rglob("*")) == [
        "keep.tmp",
        "out",
        "sub",
        "sub/.rojo-link.tmp",
    ]
    assert (outside / ".rojo-theirs.tmp").read_text() == "not ours"


def test_cut_off_writes_through_a_link_leave_no_temp_file_next_to_its_target(tmp_path):
    """A write through a link puts its temporary file next to the file the link names."""
    root = tmp_path / "root"
    (root / "real").mkdir(parents=True)
    (root / "real" / "notes.md").write_text("mine\n")
    (root / "notes.md").symlink_to("real/notes.md")
    (root / "real" / ".rojo-half.tmp").write_text("half")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / ".rojo-theirs.tmp").write_text("not ours")
    (root / "away.md").symlink_to(outside / "away.md")
    calls = [
        {
            "id": f"call_{number}",
            "function": {"name": "write_text_content", "arguments": json.dumps(arguments)},
        }
        for number, arguments in enumerate(
            [
                {"path": "notes.md", "text": "new"},
                {"path": "away.md", "text": "refused: its link leaves the root"},
            ]
        )
    ]

    cut_off_writes_clean(root, calls, registry)

    assert temp_files(root / "real") == []
    assert (root / "real" / "notes.md").read_text() == "mine\n"
    assert temp_files(outside) == [".rojo-theirs.tmp"]
