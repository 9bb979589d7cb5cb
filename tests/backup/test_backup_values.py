"""Values a restore must bring back as they were written, on either database."""

import io
import shutil

import pytest
from django.conf import settings
from django.core.management import call_command

from rojos.models import Rojo
from tests.support.helpers import make_rojo

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.backend]


def backed_up_and_emptied(tmp_path) -> str:
    """A backup of the installation, verified, then the installation emptied."""
    path = tmp_path / "backup.tar"
    call_command("backup", str(path), stdout=io.StringIO())
    call_command("verify-backup", str(path), stdout=io.StringIO())
    call_command("flush", interactive=False, verbosity=0)
    for child in settings.ROJO_STORAGE_DIR.iterdir():
        shutil.rmtree(child)
    return str(path)


def test_json_integers_wider_than_64_bits_come_back_exact(tmp_path):
    """Not a float near it (2**64 + 1), and not a refusal (10**400, no double holds it)."""
    options = {
        "seed": 2**64 + 1,
        "huge": 10**400,
        "edges": [2**63 - 1, 2**63, 2**64 - 1, 2**64, -(2**63), -(2**63) - 1],
        "ratio": 0.1,
        "text": "12345678901234567890 in words",
    }
    rojo = make_rojo("http://127.0.0.1:9", request_options=options)
    path = backed_up_and_emptied(tmp_path)

    call_command("restore", path, stdout=io.StringIO())

    back = Rojo.objects.get(pk=rojo.pk).request_options
    assert back == options
    assert [type(n) for n in [back["seed"], back["huge"], *back["edges"]]] == [int] * 8
