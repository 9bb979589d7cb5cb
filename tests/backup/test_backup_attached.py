"""The images and PDFs attached to messages are in a backup, and a restore puts them back."""

import io
import shutil

import pytest
from django.conf import settings
from django.core.management import call_command

from roject.storage import image_keep, image_read, pdf_keep, pdf_read
from rojos.selftest.asks import red_square_png
from tests.backup.archive_contents import archive_contents
from tests.support.pdfs import pdf_file

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.backend]


def test_a_backup_holds_a_projects_images_and_pdfs_and_a_restore_puts_them_back(project, tmp_path):
    png, pdf = red_square_png(), pdf_file(["Kept"])
    image = image_keep(project_id=project.pk, data=png, max_bytes=1 << 20)
    pdf_name = pdf_keep(project_id=project.pk, data=pdf, max_bytes=1 << 20)
    path = tmp_path / "backup.tar"
    call_command("backup", str(path), stdout=io.StringIO())

    _, files = archive_contents(path)
    kind, mode, size, _, _ = files[(project.pk, f"images/{image.sha256}")]
    assert (kind, mode, size) == ("file", 0o600, len(png))
    kind, mode, size, _, _ = files[(project.pk, f"pdfs/{pdf_name}")]
    assert (kind, mode, size) == ("file", 0o600, len(pdf))

    call_command("flush", interactive=False, verbosity=0)
    for child in settings.ROJO_STORAGE_DIR.iterdir():
        shutil.rmtree(child)
    call_command("restore", str(path), stdout=io.StringIO())
    assert image_read(project_id=project.pk, sha256=image.sha256)[1] == png
    assert pdf_read(project_id=project.pk, sha256=pdf_name) == pdf
