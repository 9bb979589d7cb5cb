"""What people upload on a full disk: an image or a PDF for the message box, a file, a .zip
to unpack. Each is refused with the disk-full sentence (400), nothing of it left on the disk
and no change recorded; before, each was a 500, and a .zip's entries that did not fit were
skipped as "damaged". And a project's first use on a disk with no room for a directory or
a file: its storage, its change lock. On a real 2 MiB tmpfs (tests/support/small_disk.py):
the kernel's own ENOSPC, part-way through a write."""

import io
import os
import zipfile
from pathlib import Path

import pytest

from roject.storage import project_root_create
from rojos.models import FileChange
from rojos.selftest.asks import red_square_png
from tests.support.pdfs import pdf_file
from tests.support.small_disk import small_disk_mounted

pytestmark = pytest.mark.django_db(transaction=True)

RAW = {"Content-Type": "application/octet-stream"}
FULL = "No space left on device: 'the {}' (the server's storage is full; nothing was changed)"
# Room left on the disk: each upload below needs more, and an undo copy's check is not asked.
ROOM = 60_000


@pytest.fixture
def nearly_full(tmp_path, settings, project) -> Path:
    """ROJO_STORAGE_DIR on a 2 MiB tmpfs with ROOM bytes left; yields the project's dir."""
    with small_disk_mounted(tmp_path) as mount:
        settings.ROJO_STORAGE_DIR = mount / "storage"
        root = project_root_create(project.pk)
        fs = os.statvfs(mount)
        (root / "filler.bin").write_bytes(b"x" * (fs.f_bavail * fs.f_frsize - ROOM))
        yield root.parent


def left_behind(project_dir: Path) -> list[str]:
    """Every file on the project's storage but the filler and the change lock."""
    files = (p for p in project_dir.rglob("*") if p.is_file())
    return sorted(str(p.relative_to(project_dir)) for p in files if p.name != "changes.lock")


@pytest.mark.parametrize("kind", ["image", "PDF"])
def test_an_image_or_pdf_that_does_not_fit_is_refused_and_leaves_nothing(
    nearly_full, client_for, users, project, kind
):
    if kind == "image":  # bytes after a PNG's end are kept with it, as sent
        url, body = f"/api/projects/{project.pk}/images", red_square_png() + b"\0" * 2 * ROOM
    else:
        url, body = f"/api/projects/{project.pk}/pdfs", pdf_file(["x" * 2 * ROOM])
    response = client_for(users["editor"]).post(url, content=body, headers=RAW)

    assert response.status_code == 400, response.text
    assert response.json() == {"detail": FULL.format(kind.lower() if kind == "image" else kind)}
    assert left_behind(nearly_full) == ["root/filler.bin"]


def test_a_file_upload_that_does_not_fit_is_refused_and_leaves_nothing(
    nearly_full, client_for, users, project
):
    response = client_for(users["editor"]).post(
        f"/api/projects/{project.pk}/files/upload?path=big.bin",
        content=os.urandom(2 * ROOM),
        headers=RAW,
    )

    assert response.status_code == 400, response.text
    assert response.json() == {"detail": FULL.format("upload")}
    assert left_behind(nearly_full) == ["root/filler.bin"]
    assert not FileChange.objects.exists()


def test_a_zip_whose_entries_do_not_fit_once_unpacked_is_refused_not_called_damaged(
    nearly_full, client_for, users, project
):
    """The archive itself fits; its entries, written beside it, do not."""
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.writestr("one.bin", os.urandom(ROOM // 3))
        zipped.writestr("two.bin", os.urandom(ROOM // 3))

    response = client_for(users["editor"]).post(
        f"/api/projects/{project.pk}/files/upload?path=unpacked&unpack=true",
        content=archive.getvalue(),
        headers=RAW,
    )

    assert response.status_code == 400, response.text
    assert response.json() == {"detail": FULL.format("upload")}
    assert left_behind(nearly_full) == ["root/filler.bin"]
    assert not (nearly_full / "root" / "unpacked").exists()
    assert not FileChange.objects.exists()


def test_a_projects_first_use_with_no_room_for_its_storage_is_refused_not_a_500(
    tmp_path, settings, client_for, users, project
):
    """No inode left: the project's first file needs its change lock, its first upload its
    incoming/, and a project whose storage is not there yet its directories. Before, each
    was a 500 whose error named the server's path."""
    other = project.__class__.objects.create(name="Fresh")
    other.memberships.create(user=users["editor"], role="editor")
    with small_disk_mounted(tmp_path, inodes=64) as mount:
        settings.ROJO_STORAGE_DIR = mount / "storage"
        project_root_create(project.pk)
        filled = mount / "filled"
        filled.mkdir()
        with pytest.raises(OSError):  # until no inode is left
            for number in range(64):
                (filled / str(number)).touch()
        client = client_for(users["editor"])

        new_file = client.post(
            f"/api/projects/{project.pk}/files/new", json={"path": "a.md", "text": "A"}
        )
        upload = client.post(
            f"/api/projects/{project.pk}/files/upload?path=b.bin", content=b"B", headers=RAW
        )
        listing = client.get(f"/api/projects/{other.pk}/files")

    for response in (new_file, upload, listing):
        assert response.status_code == 400, response.text
        assert "the server's storage is full" in response.json()["detail"]
        assert str(mount) not in response.text
