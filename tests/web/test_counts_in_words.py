"""A count shown to a person says its noun in the right number: "1 project", "3 projects".

The admin's messages, the commands' output and the errors a person or the model reads said
"1 projects", "1 token(s) revoked", "has only 1 lines": each now goes through Django's
ngettext (the page's counts through static/rojo/counted.js, tests/browser/test_browser_counts.py).
"""

import io
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client
from django.utils import timezone
from mcp.types import EmbeddedResource, ImageContent, TextResourceContents

from roject.audit.log import AuditAction
from roject.doctor import Context
from roject.doctor.settings_checks import secret_key
from roject.identity.tokens import api_token_create
from roject.models import AuditEntry
from roject.storage import StorageError, project_root
from roject.storage.reading import read_lines
from rojos.mcp.results import describe_part
from rojos.provider.images import ImagesRefused, images_check
from rojos.tools.diff import MAX_CHARS, unified_diff
from tests.support.helpers import make_rojo

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_backup_of_one_project_with_one_file_says_so_in_the_singular(project, tmp_path):
    (project_root(project.pk) / "only.md").write_text("the one file\n")
    path = tmp_path / "rojo.tar"
    written, checked = io.StringIO(), io.StringIO()

    call_command("backup", str(path), stdout=written)
    call_command("verify-backup", str(path), stdout=checked)

    for out in (written.getvalue(), checked.getvalue()):
        assert "storage all: 1 project, 1 file, 13 bytes" in out, out
        assert "1 projects" not in out and "1 files" not in out


def test_the_admin_says_1_token_revoked(users):
    made = api_token_create(user=users["editor"], name="agent")
    staff = get_user_model().objects.create_superuser("root", password="pw-root")
    client = Client()
    client.force_login(staff)

    page = client.post(
        "/admin/roject/apitoken/",
        {"action": "revoke", "_selected_action": [made.token.pk]},
        follow=True,
    ).content.decode()

    assert "1 token revoked." in page and "token(s)" not in page


def test_audit_prune_says_1_audit_entry_older_than_1_day(users):
    AuditEntry(
        action=AuditAction.LOGIN, actor_kind="user", at=timezone.now() - timedelta(days=2)
    ).save()
    counted, pruned = io.StringIO(), io.StringIO()

    call_command("audit_prune", "--days", "1", "--dry-run", stdout=counted)
    call_command("audit_prune", "--days", "1", stdout=pruned)

    assert counted.getvalue() == "1 audit entry older than 1 day would be pruned\n"
    assert pruned.getvalue() == "1 audit entry older than 1 day pruned\n"


def test_the_doctor_says_a_key_of_1_character(settings):
    settings.SECRET_KEY = "x"

    (finding,) = secret_key(Context())

    assert finding.message == "SECRET_KEY has 1 character, 1 distinct."


def test_reading_past_the_end_of_a_one_line_file_says_1_line(root):
    (root / "one.txt").write_text("a single line\n")

    with pytest.raises(StorageError) as refused:
        read_lines(root, "one.txt", offset=5, limit=None)

    assert str(refused.value) == "'one.txt' has only 1 line"


def test_a_limit_of_1_image_per_message_says_1_image(settings):
    settings.ROJO_MAX_IMAGES_PER_MESSAGE = 1
    rojo = make_rojo("http://127.0.0.1:9/v1")

    with pytest.raises(ImagesRefused) as refused:
        images_check(rojo=rojo, model=None, count=2)

    assert str(refused.value) == "A message can carry at most 1 image; attach fewer."


def test_a_diff_cut_before_its_last_line_says_1_more_line():
    diff = unified_diff("notes.md", "", "short\n" + "x" * (MAX_CHARS + 10) + "\n")

    assert diff.endswith("... the diff goes on for 1 more line\n")


def test_an_mcp_servers_one_byte_image_and_one_character_resource_say_so():
    image = ImageContent(type="image", data="QQ==", mimeType="image/png")
    resource = EmbeddedResource(
        type="resource",
        resource=TextResourceContents(uri="file:///a.txt", mimeType="text/plain", text="A"),
    )

    assert describe_part(image) == "[image image/png, 1 byte]"
    assert describe_part(resource) == "[resource file:///a.txt (text/plain, 1 character)]\nA"
