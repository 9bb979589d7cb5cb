"""A file that is no backup archive at all is named as such, apart from a broken archive.

`verify-backup` and `restore` given a text file or a zip said "the archive is damaged or cut
short", sending the operator to look for a broken backup when the wrong file was named.
They now say FILE is not a backup archive made by `backup` (and why: not a tar, empty, a
tar of something else); an archive that is cut or damaged, even inside its first header,
is still called so.
"""

import gzip
import io
import tarfile
import zipfile

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.backend]


def both_refuse(path) -> tuple[str, str]:
    """verify-backup's and restore's refusals of `path`; the restore leaves every row."""
    users = get_user_model().objects.count()
    with pytest.raises(CommandError) as checked:
        call_command("verify-backup", str(path), stdout=io.StringIO())
    with pytest.raises(CommandError) as restoring:
        call_command("restore", str(path), stdout=io.StringIO())
    assert "nothing was restored" in str(restoring.value)
    assert get_user_model().objects.count() == users
    return str(checked.value), str(restoring.value)


def zipped() -> bytes:
    data = io.BytesIO()
    with zipfile.ZipFile(data, "w") as archive:
        archive.writestr("notes.txt", "meeting notes\n" * 200)
    return data.getvalue()


def foreign_tar() -> bytes:
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w") as archive:
        info = tarfile.TarInfo("photos/cat.jpg")
        info.size = 3
        archive.addfile(info, io.BytesIO(b"cat"))
    return data.getvalue()


@pytest.mark.parametrize(
    ("name", "content", "why"),
    [
        ("notes.txt", b"a short text file\n", "not a tar archive"),
        ("log.txt", b"a text file past a tar header's 512 bytes\n" * 40, "not a tar archive"),
        ("rojo.zip", zipped(), "not a tar archive"),
        ("rojo.tar.gz", gzip.compress(b"text, compressed\n" * 100, mtime=0), "not a tar archive"),
        ("rojo.tar", b"", "an empty file, not a tar archive"),
        ("photos.tar", foreign_tar(), "a tar archive, but it does not start with a backup's "
         "header"),
    ],
    ids=["text", "long-text", "zip", "gzip-of-text", "empty", "another-tar"],
)  # fmt: skip
def test_a_file_that_is_no_backup_is_named_as_such(users, tmp_path, name, content, why):
    path = tmp_path / name
    path.write_bytes(content)

    checked, restoring = both_refuse(path)

    assert checked == f"{path} is not a backup archive made by `backup` ({why})"
    assert restoring == (
        f"restore refused: {path} is not a backup archive made by `backup` ({why}); "
        "nothing was restored"
    )


@pytest.fixture
def archive(users, tmp_path):
    path = tmp_path / "rojo.tar"
    call_command("backup", str(path), "--database-only", stdout=io.StringIO())
    return path.read_bytes()


@pytest.mark.parametrize("cut", [60, 300, 700])
def test_an_archive_cut_in_its_first_header_is_still_cut_short(archive, tmp_path, cut):
    """Cut before tar can read its first header, it is a broken backup, not another file."""
    path = tmp_path / "cut.tar"
    path.write_bytes(archive[:cut])

    checked, restoring = both_refuse(path)

    assert checked.startswith(f"{path} is not a sound backup: the archive is damaged or cut short")
    assert "not a backup archive" not in checked + restoring
    assert "damaged or cut short" in restoring


def test_a_compressed_archive_cut_early_or_a_first_header_damaged_is_still_damaged(
    archive, tmp_path
):
    compressed = gzip.compress(archive)
    flipped = bytearray(archive)
    flipped[110] ^= 0x01  # in the first header's mode: its checksum fails, "ustar" is there

    for name, content in [("cut.tar.gz", compressed[:40]), ("flipped.tar", bytes(flipped))]:
        path = tmp_path / name
        path.write_bytes(content)
        checked, restoring = both_refuse(path)
        assert "damaged or cut short" in checked and "damaged or cut short" in restoring, name
        assert "not a backup archive" not in checked + restoring
