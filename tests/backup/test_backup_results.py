"""The tool results kept for conversations are in a backup, and a restore puts them back:
a restored conversation's read_result handles read what they read before."""

import io
import shutil

import pytest
from django.conf import settings
from django.core.management import call_command

from roject.storage import result_keep, result_read
from rojos.models import Conversation
from tests.backup.archive_contents import archive_contents

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.backend]


def test_a_backup_holds_kept_results_and_a_restore_puts_them_back(users, project, tmp_path):
    conversation = Conversation.objects.create(project=project, user=users["editor"])
    text = "a long listing ✓\n" * 1000
    handle = result_keep(project_id=project.pk, conversation_id=conversation.pk, text=text)
    path = tmp_path / "backup.tar"
    call_command("backup", str(path), stdout=io.StringIO())

    _, files = archive_contents(path)
    assert files[(project.pk, f"results/{conversation.pk}")][:2] == ("dir", 0o700)
    kind, mode, size, _, _ = files[(project.pk, f"results/{conversation.pk}/{handle}")]
    assert (kind, mode, size) == ("file", 0o600, len(text.encode()))

    call_command("flush", interactive=False, verbosity=0)
    for child in settings.ROJO_STORAGE_DIR.iterdir():
        shutil.rmtree(child)
    call_command("restore", str(path), stdout=io.StringIO())
    part = result_read(
        project_id=project.pk,
        conversation_id=conversation.pk,
        handle=handle,
        offset=0,
        length=1 << 20,
    )
    assert part.text == text
