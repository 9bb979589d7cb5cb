"""A backup never replaces a file that is there already (an older backup) unless told to.

`backup FILE` wrote over an existing FILE without a word, so a repeated name lost the
backup before it. Now it is refused before any work, FILE left byte for byte, unless
`--overwrite`; a file made at that name while a backup ran is kept as well.
"""

import io
import os

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from roject.backup import ArchiveExists, backup_write
from tests.support.backup_installation import installation_build

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.backend]

OLDER = b"an older backup, which must not be lost\n"


@pytest.fixture
def older(tmp_path):
    """A file where the next backup is asked to go, with an mtime of its own."""
    path = tmp_path / "backups" / "rojo.tar.gz"
    path.parent.mkdir()
    path.write_bytes(OLDER)
    os.utime(path, (1_000_000_000, 1_000_000_000))
    return path


def assert_untouched(path) -> None:
    assert path.read_bytes() == OLDER and path.stat().st_mtime == 1_000_000_000
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]  # no partial left


def test_an_existing_file_is_refused_and_left_as_it_was(users, project, older):
    installation_build(users, project)
    out = io.StringIO()

    with pytest.raises(CommandError) as refusal:
        call_command("backup", str(older), stdout=out)

    message = str(refusal.value)
    assert message.startswith(f"backup refused: {str(older)!r} exists already")
    assert "--overwrite" in message and out.getvalue() == ""
    assert_untouched(older)


def test_overwrite_replaces_it_with_a_sound_archive(users, project, older):
    installation_build(users, project)

    call_command("backup", str(older), "--overwrite", stdout=io.StringIO())

    assert older.read_bytes() != OLDER
    checked = io.StringIO()
    call_command("verify-backup", str(older), stdout=checked)
    assert "sound" in checked.getvalue()
    assert sorted(p.name for p in older.parent.iterdir()) == [older.name]


def test_a_symbolic_link_at_the_name_is_refused_too(users, tmp_path, older):
    """A dangling one as well: `exists()` follows links, the refusal must not."""
    link = tmp_path / "backups" / "latest.tar"
    link.symlink_to(tmp_path / "nowhere.tar")

    with pytest.raises(CommandError, match="exists already"):
        call_command("backup", str(link), "--database-only", stdout=io.StringIO())

    assert link.is_symlink() and not (tmp_path / "nowhere.tar").exists()


def test_a_file_made_at_the_name_during_the_backup_is_kept(users, project, older):
    """The name is taken only at the end, by a link that fails rather than replace a file:
    a file that came while the archive was written (here: before backup_write was called,
    past the command's own check) stays, and the finished archive goes."""
    with pytest.raises(ArchiveExists, match="exists already"):
        backup_write(path=older, storage="all")

    assert_untouched(older)


def test_a_file_system_without_hard_links_still_gets_its_archive(
    users, project, tmp_path, monkeypatch
):
    """A FUSE mount without links answers ENOSYS, not EPERM: the archive, written whole, was
    then deleted and the backup failed at its very end. Every refusal of a link falls back
    to a check and a rename, which says what is really wrong."""
    import errno

    from roject.backup import dump

    def no_links(source, target):
        raise OSError(errno.ENOSYS, "Function not implemented")

    installation_build(users, project)
    monkeypatch.setattr(dump.os, "link", no_links)
    path = tmp_path / "backups" / "rojo.tar.gz"
    path.parent.mkdir()

    call_command("backup", str(path), stdout=io.StringIO())

    checked = io.StringIO()
    call_command("verify-backup", str(path), stdout=checked)
    assert "sound" in checked.getvalue()
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]
