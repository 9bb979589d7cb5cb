"""Values a restore must bring back as they were written, on either database."""

import io
import shutil

import pytest
from django.conf import settings
from django.contrib.auth.models import Group
from django.core.management import call_command
from django.db import connection

from roject.backup.archive import ArchiveWriter
from roject.backup.manifest import header_make
from roject.backup.tables import row_encoder
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


def archive_with_nuls(path) -> tuple[int, int]:
    """An archive whose rows hold NULs, as SQLite keeps them: a group's name, and a rojo's
    name and request options (a key and strings inside). Returns the ids of both."""
    rojo = make_rojo("http://127.0.0.1:9")
    group = Group.objects.create(name="reviewers")
    with path.open("wb") as out:
        writer = ArchiveWriter(
            out, header=header_make(connection, storage="none", projects=[]), compress=False
        )
        columns, encode = row_encoder(Group)
        writer.table_add("auth.group", "auth_group", columns, iter([encode((group.pk, "re\0v"))]))
        columns, encode = row_encoder(Rojo)
        row = dict(zip(columns, Rojo.objects.values_list().get(pk=rojo.pk), strict=True))
        row["name"] = "Ro\0jo"
        row["request_options"] = {"stop\0": ["a\0b", 1, {"k": "\0"}], "plain": "x"}
        writer.table_add("rojos.rojo", "rojos_rojo", columns, iter([encode(tuple(row.values()))]))
        writer.close()
    return group.pk, rojo.pk


def test_a_nul_in_text_becomes_a_replacement_character_on_postgresql(tmp_path):
    """PostgreSQL refuses NUL in text and JSON, which SQLite kept: there each becomes U+FFFD,
    and verify-backup and restore say how many values in which tables; SQLite keeps them."""
    path = tmp_path / "nuls.tar"
    group_id, rojo_id = archive_with_nuls(path)
    call_command("flush", interactive=False, verbosity=0)
    checked, restored = io.StringIO(), io.StringIO()

    call_command("verify-backup", str(path), stdout=checked)
    call_command("restore", str(path), stdout=restored)

    nul = "\0" if connection.vendor == "sqlite" else "\ufffd"
    assert Group.objects.get(pk=group_id).name == f"re{nul}v"
    rojo = Rojo.objects.get(pk=rojo_id)
    assert rojo.name == f"Ro{nul}jo"
    assert rojo.request_options == {f"stop{nul}": [f"a{nul}b", 1, {"k": nul}], "plain": "x"}
    if connection.vendor == "postgresql":
        said = "3 values in 2 tables held a NUL (0x00)"
        assert said in checked.getvalue() and said in restored.getvalue()
        assert "auth.group: 1, rojos.rojo: 2" in restored.getvalue()
        assert "will become U+FFFD" in checked.getvalue()
        assert "became U+FFFD" in restored.getvalue()
    else:
        assert "NUL" not in checked.getvalue() + restored.getvalue()
