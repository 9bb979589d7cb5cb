"""An archive is checked whole before anything is restored, and a restore is all or nothing.

A corrupted, cut or tampered archive is refused by `verify-backup` and `restore` with a
clear error; one from a newer Rojo is refused with the reason; a non-empty installation is
refused unless --replace; a restore that fails part way leaves nothing of it behind.
"""

import io
import json
import os
import shutil
import tarfile

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from roject.backup.archive import ArchiveWriter
from roject.backup.manifest import header_make
from roject.backup.tables import row_encoder
from roject.storage import project_root
from roject.storage.backups import StoredEntry
from rojos.mcp.sealed import seal
from rojos.models import FileChange, McpAccount
from tests.backup.archive_contents import archive_contents
from tests.support.backup_installation import BINARY, installation_build
from tests.support.mcp_helpers import time_server

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.backend]


@pytest.fixture
def archive(users, project, tmp_path):
    installation_build(users, project)
    path = tmp_path / "backup.tar"
    call_command("backup", str(path), stdout=io.StringIO())
    return path


def installation_empty() -> None:
    call_command("flush", interactive=False, verbosity=0)
    for child in settings.ROJO_STORAGE_DIR.iterdir():
        shutil.rmtree(child)


def assert_nothing_restored() -> None:
    assert not get_user_model().objects.exists()
    assert not FileChange.objects.exists()
    assert list(settings.ROJO_STORAGE_DIR.iterdir()) == []  # no project, no staging left


def refused(path, match: str) -> None:
    """Both commands refuse the archive with words that say why, and restore nothing."""
    with pytest.raises(CommandError, match=match) as checked:
        call_command("verify-backup", str(path), stdout=io.StringIO())
    assert "not a sound backup" in str(checked.value)
    installation_empty()
    with pytest.raises(CommandError, match=match) as restoring:
        call_command("restore", str(path), stdout=io.StringIO())
    assert "nothing was restored" in str(restoring.value)
    assert_nothing_restored()


def rewritten(source, target, change) -> None:
    """Copy a tar member by member, `change(name, data)` giving each file's new bytes."""
    with tarfile.open(source) as old, tarfile.open(target, "w", format=tarfile.PAX_FORMAT) as new:
        for member in old:
            data = old.extractfile(member).read() if member.isfile() else None
            if data is not None:
                data = change(member.name, data)
                member.size = len(data)
            new.addfile(member, io.BytesIO(data) if data is not None else None)


def test_a_sound_archive_is_verified_and_summarised(archive):
    out = io.StringIO()
    call_command("verify-backup", str(archive), stdout=out)
    assert "sound" in out.getvalue() and "3 projects" in out.getvalue()


def test_a_flipped_byte_is_refused(archive, tmp_path):
    data = bytearray(archive.read_bytes())
    at = data.find(BINARY[:512]) + 100  # inside a file's bytes: only the digest can tell
    data[at] ^= 0x01
    damaged = tmp_path / "flipped.tar"
    damaged.write_bytes(bytes(data))
    refused(damaged, "differs from its manifest")


def test_a_cut_archive_is_refused(archive, tmp_path):
    cut = tmp_path / "cut.tar"
    cut.write_bytes(archive.read_bytes()[: archive.stat().st_size // 2])
    refused(cut, "cut short")


def test_a_compressed_archive_cut_or_garbled_is_refused(users, project, tmp_path):
    installation_build(users, project)
    path = tmp_path / "backup.tar.gz"
    call_command("backup", str(path), stdout=io.StringIO())
    data = path.read_bytes()
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(data[: len(data) * 2 // 3])
    refused(cut, "cut short")


def test_a_file_changed_in_the_archive_is_refused_by_its_project(archive, tmp_path):
    tampered = tmp_path / "tampered.tar"

    def change(name, data):
        return b"#!/bin/sh\nrm -rf ~\n" if name.endswith("root/run.sh") else data

    rewritten(archive, tampered, change)
    refused(tampered, r"storage of project \d+ differs from its manifest")


def test_rows_changed_in_the_archive_are_refused(archive, tmp_path):
    tampered = tmp_path / "tampered.tar"

    def change(name, data):
        return data.replace(b'"editor"', b'"admin"') if "auth.user" in name else data

    rewritten(archive, tampered, change)
    refused(tampered, "auth.user.jsonl' differs from its manifest")


def test_an_id_sequence_changed_in_the_manifest_is_refused(users, tmp_path):
    """The users' sequence one lower (5 to 4 in a fresh database): restored, the next user
    would take the id of the user deleted before the backup."""
    gone = get_user_model().objects.create_user(username="gone").pk  # 5 in a fresh database
    get_user_model().objects.filter(pk=gone).delete()
    path = tmp_path / "backup.tar"
    call_command("backup", str(path), "--database-only", stdout=io.StringIO())
    tampered = tmp_path / "tampered.tar"
    kept, lower = f'"auth.user":{gone}'.encode(), f'"auth.user":{gone - 1}'.encode()

    def change(name, data):
        if name != "rojo-backup/manifest.json":
            return data
        assert kept in data
        return data.replace(kept, lower)

    rewritten(path, tampered, change)
    refused(tampered, "id sequences differ from their digest")


def test_a_restore_hands_out_ids_after_every_restored_row(users, tmp_path):
    """Even for a table the manifest names no sequence of (PostgreSQL's would start at 1)."""
    columns, encode = row_encoder(Group)
    path = tmp_path / "groups.tar"
    with path.open("wb") as out:
        header = header_make(connection, storage="none", projects=[])
        writer = ArchiveWriter(out, header=header, compress=False)
        writer.table_add("auth.group", "auth_group", columns, iter([encode((7, "seventh"))]))
        writer.close()
    installation_empty()
    call_command("restore", str(path), stdout=io.StringIO())
    assert Group.objects.create(name="next").pk == 8


@pytest.mark.parametrize("where", ["a directory", "in no directory"])
def test_a_backup_to_a_wrong_path_is_refused_before_it_starts(users, tmp_path, where):
    """A directory, or a file in none, is named as such; nothing of a backup is written
    (to a directory it was written whole beside it, then failed naming its temporary file)."""
    target = tmp_path / "out" / "backups"
    target.mkdir(parents=True)
    path = target if where == "a directory" else target / "missing" / "rojo.tar"
    expected = "is a directory; name the archive" if where == "a directory" else "no directory"
    with pytest.raises(CommandError, match=expected) as refusal:
        call_command("backup", str(path), stdout=io.StringIO())
    assert ".partial" not in str(refusal.value)
    assert sorted((tmp_path / "out").rglob("*")) == [target]


def test_a_directory_given_for_the_archive_is_named_as_one(users, tmp_path):
    """verify-backup and restore of a directory said "[Errno 21] Is a directory"."""
    refused(tmp_path, f"{tmp_path} is a directory; name the archive in it")


def test_an_archive_from_a_newer_rojo_is_refused_with_the_reason(users, tmp_path):
    header = header_make(connection, storage="none", projects=[])
    header["rojo_version"] = "99.0.0"
    header["migrations"].append("rojos.9999_from_the_future")
    path = tmp_path / "newer.tar"
    with path.open("wb") as out:
        ArchiveWriter(out, header=header, compress=False).close()
    refused(path, r"made by Rojo 99\.0\.0, newer than this one .*upgrade")


def test_an_archive_of_an_older_schema_is_not_called_restorable_by_verify(users, tmp_path):
    """verify-backup says whether this Rojo can restore the archive: one whose schema lacks
    a migration this database has is sound, and restore refuses it; verify says so too
    (it said "sound" alone)."""
    header = header_make(connection, storage="none", projects=[])
    header["migrations"].remove(sorted(header["migrations"])[-1])
    path = tmp_path / "older.tar"
    with path.open("wb") as out:
        ArchiveWriter(out, header=header, compress=False).close()
    with pytest.raises(CommandError, match=r"is sound, but .*older schema"):
        call_command("verify-backup", str(path), stdout=io.StringIO())
    installation_empty()
    with pytest.raises(CommandError, match="older schema"):
        call_command("restore", str(path), stdout=io.StringIO())


def test_a_non_empty_installation_is_refused_unless_told(archive):
    before = archive_contents(archive)
    with pytest.raises(CommandError, match="not empty"):
        call_command("restore", str(archive), stdout=io.StringIO())
    FileChange.objects.all().delete()  # changed since the backup: --replace puts it back
    call_command("restore", str(archive), "--replace", stdout=io.StringIO())
    assert FileChange.objects.count() == len(before[0]["rojos.filechange"])
    assert [p.name for p in settings.ROJO_STORAGE_DIR.iterdir() if not p.name.isdigit()] == []


def _hook_failing() -> None:
    raise RuntimeError("the database went away")


def test_a_clean_up_failing_after_the_commit_is_told_as_such(archive, settings):
    """The restore hooks run once the restore is committed: one failing there is told as
    what it is, not as a refusal (which said "nothing was restored" of a restored install)."""
    settings.ROJO_RESTORE_HOOKS = [f"{__name__}._hook_failing"]
    installation_empty()
    out = io.StringIO()
    with pytest.raises(CommandError) as failed:
        call_command("restore", str(archive), stdout=out)
    message = str(failed.value)
    assert "nothing was restored" not in message
    assert f"{__name__}._hook_failing failed: the database went away" in message
    assert "restored" in out.getvalue() and get_user_model().objects.exists()


def test_a_restore_failing_part_way_leaves_nothing(users, project, tmp_path):
    """A sound archive whose rows the database refuses (two users of one name): the rows
    before are rolled back, and the storage already staged is removed."""
    root = project_root(project.pk)
    (root / "kept.txt").write_text("kept\n")
    path = tmp_path / "clash.tar"
    user = get_user_model()
    columns, encode = row_encoder(user)
    row = list(user.objects.values_list(*[f.attname for f in user._meta.concrete_fields])[0])
    twin = [*row]
    twin[columns.index("id")] = 10_000
    with path.open("wb") as out:
        writer = ArchiveWriter(
            out,
            header=header_make(connection, storage="all", projects=[project.pk]),
            compress=False,
        )
        writer.storage_add(
            project.pk, StoredEntry(path="root", kind="dir", mode=0o755, mtime=0), None
        )
        with (root / "kept.txt").open("rb") as content:
            entry = StoredEntry(path="root/kept.txt", kind="file", mode=0o644, mtime=0, size=5)
            writer.storage_add(project.pk, entry, content)
        writer.table_add("auth.user", "auth_user", columns, iter([encode(row), encode(twin)]))
        writer.close()
    call_command("verify-backup", str(path), stdout=io.StringIO())
    installation_empty()
    with pytest.raises(CommandError, match="nothing was restored"):
        call_command("restore", str(path), stdout=io.StringIO())
    assert_nothing_restored()


def test_the_database_alone_or_some_projects(users, project, tmp_path):
    built = installation_build(users, project)
    database = tmp_path / "database.tar"
    call_command("backup", str(database), "--database-only", stdout=io.StringIO())
    tables, files = archive_contents(database)
    assert files == {} and len(tables["rojos.filechange"]) == FileChange.objects.count()
    some = tmp_path / "some.tar"
    chosen = built.projects[1].pk
    call_command("backup", str(some), "--project", str(chosen), stdout=io.StringIO())
    assert {project_id for project_id, _ in archive_contents(some)[1]} == {chosen}
    with pytest.raises(CommandError, match="no project with id 999999"):
        call_command("backup", str(tmp_path / "x.tar"), "--project", "999999")
    assert not (tmp_path / "x.tar").exists()
    assert [p for p in os.listdir(tmp_path) if p.endswith(".partial")] == []


@pytest.mark.parametrize(
    ("entries", "match"),
    [
        # A name that climbs out of the project's directory.
        ([("root", "dir", ""), ("root/../../escaped.txt", "file", "")], "not allowed"),
        # A file under a link: written, it would land where the link points.
        ([("root", "dir", ""), ("root/out", "link", "{outside}"), ("root/out/x.txt", "file", "")],
         "has no folder"),
        # A project's root, undo copy or attachments that is a link: the gate, undo and the
        # attachments would work wherever it points (a link is kept only inside the root).
        ([("root", "link", "{outside}")], "not allowed"),
        ([("undo", "dir", ""), ("undo/" + "0" * 32, "link", "{outside}")], "not allowed"),
        ([("root", "dir", ""), ("images", "link", "{outside}")], "not allowed"),
        ([("pdfs", "dir", ""), ("pdfs/a.pdf", "link", "{outside}")], "not allowed"),
        ([("results", "dir", ""), ("results/1", "link", "{outside}")], "not allowed"),
    ],
)  # fmt: skip
def test_a_storage_entry_that_would_reach_outside_is_refused(
    users, project, tmp_path, entries, match
):
    """Even in an archive whose digests agree (made to harm): nothing is written outside
    the staging directory, and nothing is restored (a name that climbs out is refused by
    `verify-backup` already)."""
    outside = tmp_path / "outside"
    outside.mkdir()
    path = tmp_path / "harm.tar"
    with path.open("wb") as out:
        header = header_make(connection, storage="all", projects=[project.pk])
        writer = ArchiveWriter(out, header=header, compress=False)
        for name, kind, target in entries:
            size = 5 if kind == "file" else 0
            entry = StoredEntry(
                path=name, kind=kind, mode=0o644, mtime=0, size=size,
                target=target.format(outside=outside),
            )  # fmt: skip
            writer.storage_add(project.pk, entry, io.BytesIO(b"harm\n") if size else None)
        writer.close()
    installation_empty()
    with pytest.raises(CommandError, match=match):
        call_command("restore", str(path), stdout=io.StringIO())
    assert_nothing_restored()
    assert list(outside.iterdir()) == []
    assert not (settings.ROJO_STORAGE_DIR.parent / "escaped.txt").exists()


@pytest.mark.parametrize("tokens", ["\u00e9t\u00e9", 5, ["a"]], ids=["not ascii", "number", "list"])
def test_sealed_secrets_changed_in_the_archive_are_refused(users, tmp_path, tokens):
    """An MCP account's sealed tokens turned into what no backup writes (text that is not
    base64's ASCII, a number, a list): verify-backup reads those rows for secrets a restore
    could not open before the manifest vouches for them, and refuses the archive as
    tampered, as for any changed row. Before, it stopped with a traceback."""
    McpAccount.objects.create(server=time_server(), user=users["editor"], tokens=seal(b"{}"))
    path = tmp_path / "backup.tar"
    call_command("backup", str(path), "--database-only", stdout=io.StringIO())
    tampered = tmp_path / "tampered.tar"

    def change(name, data):
        if "mcpaccount" not in name:
            return data
        head, *rows = data.splitlines()
        columns = json.loads(head)["columns"]
        changed = []
        for line in rows:
            row = json.loads(line)
            row[columns.index("tokens")] = tokens
            changed.append(json.dumps(row).encode())
        return b"\n".join([head, *changed]) + b"\n"

    rewritten(path, tampered, change)
    refused(tampered, "mcpaccount.jsonl' differs from its manifest")


def test_a_tampered_archives_setuid_and_writable_modes_are_not_restored(users, project, tmp_path):
    """An archive made to harm, its digests in order, with a setuid and setgid program, a
    file anyone may write and a sticky directory anyone may write into: the restore gives
    the files and folder back without those bits (a setuid program in the storage would run
    as the app for any account on the host; a folder open to all lets anyone plant files in
    the project), and the permissions a backup really holds come back as they were."""
    path = tmp_path / "modes.tar"
    entries = [
        ("root", "dir", 0o755),
        ("root/run", "file", 0o6755),
        ("root/open.txt", "file", 0o666),
        ("root/private.txt", "file", 0o600),
        ("root/drop", "dir", 0o1777),
        ("root/drop/x.txt", "file", 0o644),
        ("root/tight", "dir", 0o700),
    ]
    with path.open("wb") as out:
        header = header_make(connection, storage="all", projects=[project.pk])
        writer = ArchiveWriter(out, header=header, compress=False)
        for name, kind, mode in entries:
            size = 5 if kind == "file" else 0
            entry = StoredEntry(path=name, kind=kind, mode=mode, mtime=0, size=size)
            writer.storage_add(project.pk, entry, io.BytesIO(b"harm\n") if size else None)
        writer.close()
    call_command("verify-backup", str(path), stdout=io.StringIO())
    installation_empty()
    call_command("restore", str(path), stdout=io.StringIO())
    root = project_root(project.pk)
    modes = {
        name: os.stat(root / name, follow_symlinks=False).st_mode & 0o7777
        for name in ("run", "open.txt", "private.txt", "drop", "drop/x.txt", "tight")
    }
    assert modes == {
        "run": 0o755,
        "open.txt": 0o644,
        "private.txt": 0o600,
        "drop": 0o755,
        "drop/x.txt": 0o644,
        "tight": 0o700,
    }
