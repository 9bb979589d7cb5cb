"""Uploads, .zip unpacking with its attacks refused, and downloads of files and folders.

Against the live ASGI server, with real CSRF tokens and bodies streamed as a browser's XHR
sends them (`application/octet-stream`).
"""

import io
import random
import stat
import zipfile

import pytest

from roject.storage import project_root_create
from rojos.models import FileChange
from tests.support.helpers import files_in

pytestmark = pytest.mark.django_db(transaction=True)

RAW = {"Content-Type": "application/octet-stream"}


@pytest.fixture
def root(project):
    return project_root_create(project.pk)


@pytest.fixture
def editor(client_for, users):
    return client_for(users["editor"])


def upload(client, project, path: str, body: bytes, **params):
    return client.post(
        f"/api/projects/{project.pk}/files/upload",
        params={"path": path, **params},
        content=body,
        headers=RAW,
    )


def zip_of(*entries) -> bytes:
    """A .zip of (name, data) or (ZipInfo, data) entries."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in entries:
            archive.writestr(name, data)
    return buffer.getvalue()


def test_upload_writes_the_file_as_a_recorded_upload(editor, project, root, users):
    body = bytes(range(256)) * 1000
    response = upload(editor, project, "data/blob.bin", body)
    assert response.status_code == 200, response.text
    assert (root / "data" / "blob.bin").read_bytes() == body
    change = FileChange.objects.get(pk=response.json()["change"])
    assert (change.origin, change.tool, change.author) == ("upload", "upload", users["editor"])
    assert stat.S_IMODE((root / "data" / "blob.bin").stat().st_mode) == 0o644
    assert not list((root.parent / "incoming").iterdir())  # nothing left behind


def test_upload_does_not_replace_an_existing_file_unless_asked(editor, project, root):
    (root / "a.txt").write_text("mine")
    refused = upload(editor, project, "a.txt", b"theirs")
    assert refused.status_code == 409 and (root / "a.txt").read_text() == "mine"
    replaced = upload(editor, project, "a.txt", b"theirs", overwrite="true")
    assert replaced.status_code == 200 and (root / "a.txt").read_text() == "theirs"
    undo = editor.post(f"/api/changes/{replaced.json()['change']}/undo")
    assert undo.status_code == 200 and (root / "a.txt").read_text() == "mine"


def test_upload_over_the_size_limits_is_413_and_keeps_nothing(editor, project, root, settings):
    settings.ROJO_UPLOAD_MAX_FILE_BYTES = 1000
    assert upload(editor, project, "big.bin", b"x" * 1001).status_code == 413
    settings.ROJO_UPLOAD_MAX_FILE_BYTES = 10_000
    settings.ROJO_UPLOAD_MAX_BYTES = 500
    assert upload(editor, project, "big.bin", b"x" * 501).status_code == 413
    # Sent in chunks, without a Content-Length: the limit is counted as the body streams in.
    assert upload(editor, project, "big.bin", iter([b"x" * 300, b"x" * 300])).status_code == 413
    incoming = root.parent / "incoming"
    assert files_in(root) == {} and (not incoming.exists() or not list(incoming.iterdir()))


def test_an_upload_over_the_limit_is_refused_before_django_reads_its_body(
    editor, project, root, settings, caplog
):
    """A chunked body past ROJO_UPLOAD_MAX_BYTES is answered 413 by the ASGI guard: Django
    never spools the rest, the view never runs (it logs no 413), nothing reaches incoming/."""
    settings.ROJO_UPLOAD_MAX_BYTES = 1 << 20

    def body():
        for _ in range(16):  # 16 MiB offered
            yield b"x" * (1 << 20)

    response = upload(editor, project, "big.bin", body())
    assert response.status_code == 413
    assert "over the limit" in response.json()["detail"]
    assert not [r for r in caplog.records if r.name == "django.request"]
    assert files_in(root) == {}
    incoming = root.parent / "incoming"
    assert not incoming.exists() or not list(incoming.iterdir())


def test_upload_names_go_through_the_gate(editor, project, root):
    for path in ("../x.txt", "/tmp/x.txt", "a/../../x.txt", ""):
        assert upload(editor, project, path, b"x").status_code in (400, 422), path
    assert files_in(root) == {}


def test_viewers_and_outsiders_cannot_upload(client_for, users, project, root):
    assert upload(client_for(users["viewer"]), project, "a.txt", b"x").status_code == 403
    assert upload(client_for(users["outsider"]), project, "a.txt", b"x").status_code == 404
    no_csrf = client_for(users["editor"])
    del no_csrf.http.headers["X-CSRFToken"]
    assert upload(no_csrf, project, "a.txt", b"x").status_code == 403
    assert files_in(root) == {}


def test_zip_upload_unpacks_into_a_new_folder(editor, project, root):
    body = zip_of(("readme.md", "# R\n"), ("src/main.py", "print(1)\n"), ("src/", ""))
    response = upload(editor, project, "imported", body, unpack="true")
    assert response.status_code == 200, response.text
    assert sorted(response.json()["extracted"]) == ["readme.md", "src/main.py"]
    assert response.json()["skipped"] == []
    assert files_in(root) == {"imported/readme.md": "# R\n", "imported/src/main.py": "print(1)\n"}
    assert FileChange.objects.get().tool == "unzip"


def _link_entry(name: str, target: str) -> tuple[zipfile.ZipInfo, str]:
    info = zipfile.ZipInfo(name)
    info.create_system = 3
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    return info, target


def _device_entry(name: str) -> tuple[zipfile.ZipInfo, str]:
    info = zipfile.ZipInfo(name)
    info.create_system = 3
    info.external_attr = (stat.S_IFCHR | 0o600) << 16
    return info, ""


def test_zip_attacks_are_skipped_and_listed(editor, project, root, tmp_path, settings):
    """Climbing out, absolute names, links, devices and a zip bomb are each refused by name;
    the one good entry is unpacked and nothing lands outside the folder."""
    settings.ROJO_UPLOAD_ZIP_MAX_RATIO = 50
    body = zip_of(
        ("ok.txt", "fine"),
        ("../escape.txt", "x"),
        ("a/../../escape2.txt", "x"),
        ("/etc/absolute.txt", "x"),
        ("C:/windows.txt", "x"),
        _link_entry("link", "/etc/passwd"),
        _device_entry("dev"),
        ("bomb.txt", "0" * 5_000_000),
    )
    response = upload(editor, project, "in", body, unpack="true")
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["extracted"] == ["ok.txt"]
    reasons = {entry["name"]: entry["reason"] for entry in answer["skipped"]}
    assert set(reasons) == {
        "../escape.txt",
        "a/../../escape2.txt",
        "/etc/absolute.txt",
        "C:/windows.txt",
        "link",
        "dev",
        "bomb.txt",
    }
    assert "climbs out" in reasons["../escape.txt"] and "absolute" in reasons["C:/windows.txt"]
    assert "link" in reasons["link"] and "special" in reasons["dev"]
    assert "zip bomb" in reasons["bomb.txt"]
    assert files_in(root) == {"in/ok.txt": "fine"}
    assert not (root.parent / "escape.txt").exists() and not (root / "escape.txt").exists()


def _with_method(body: bytes, name: str, method: int) -> bytes:
    """The archive with entry `name`'s compression method changed (in both its headers)."""
    data, encoded = bytearray(body), name.encode()
    for signature, offset, name_at in ((b"PK\x03\x04", 8, 30), (b"PK\x01\x02", 10, 46)):
        at = data.find(signature)
        while data[at + name_at : at + name_at + len(encoded)] != encoded:
            at = data.find(signature, at + 1)
        data[at + offset : at + offset + 2] = method.to_bytes(2, "little")
    return bytes(data)


def _with_bad_crc(body: bytes, name: str) -> bytes:
    """The archive (whose first entry is `name`, stored) with that entry's first byte
    changed, so its CRC no longer matches."""
    start = 30 + len(name.encode())
    return body[:start] + bytes([body[start] ^ 0xFF]) + body[start + 1 :]


def test_bad_entries_are_skipped_with_a_reason_and_leave_nothing_behind(editor, project, root):
    """An over-long name part, an unsupported compression method and a CRC error are each
    a skipped entry with its reason (never a 500); the good entries are unpacked and
    nothing is left in incoming/."""
    stored = io.BytesIO()
    with zipfile.ZipFile(stored, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr("crc.txt", "checked")
        archive.writestr("ok.txt", "fine")
        archive.writestr("x" * 300, "long")
        archive.writestr("deflate64.txt", "odd method")
        archive.writestr("after.txt", "still")
    body = _with_bad_crc(_with_method(stored.getvalue(), "deflate64.txt", 9), "crc.txt")
    response = upload(editor, project, "in", body, unpack="true")
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["extracted"] == ["ok.txt", "after.txt"]
    reasons = {entry["name"]: entry["reason"] for entry in answer["skipped"]}
    assert set(reasons) == {"crc.txt", "x" * 300, "deflate64.txt"}
    assert "damaged" in reasons["crc.txt"] and "255 bytes" in reasons["x" * 300]
    assert "compression method" in reasons["deflate64.txt"]
    assert files_in(root) == {"in/ok.txt": "fine", "in/after.txt": "still"}
    assert list((root.parent / "incoming").iterdir()) == []


def test_a_failed_unpack_removes_what_it_unpacked(project, root, monkeypatch):
    """An error escaping the unpack part way (here the disk failing on the second entry)
    goes on to the caller, and the half-unpacked directory is gone."""
    from roject.storage import archives, uploads

    incoming = root.parent / "incoming"
    incoming.mkdir(exist_ok=True)
    (incoming / "upload.zip").write_bytes(zip_of(("a.txt", "a"), ("b.txt", "b")))
    extract = archives._extract

    def failing(archive, info, top, parts):
        if parts == ["b.txt"]:
            raise MemoryError("out of memory")
        return extract(archive, info, top, parts)

    monkeypatch.setattr(archives, "_extract", failing)
    limits = archives.ZipLimits(
        max_file_bytes=1000, max_total_bytes=1000, max_ratio=100, max_entries=10
    )
    archive = uploads.Incoming(path=incoming / "upload.zip", size=0)
    with pytest.raises(MemoryError):
        archives.zip_unpack(project_id=project.pk, archive_file=archive, limits=limits)
    assert [p.name for p in incoming.iterdir()] == ["upload.zip"]


def test_a_zip_of_too_many_entries_is_refused_from_its_end_record(editor, project, root, settings):
    """Over ROJO_UPLOAD_ZIP_MAX_ENTRIES by its end record: 400 naming the count and the
    limit, before any entry is read; nothing is unpacked or left in incoming/."""
    settings.ROJO_UPLOAD_ZIP_MAX_ENTRIES = 3
    body = zip_of(*[(f"f{n}.txt", "x") for n in range(5)])
    response = upload(editor, project, "in", body, unpack="true")
    assert response.status_code == 400, response.text
    assert "5 entries, over the limit of 3" in response.json()["detail"]
    assert files_in(root) == {} and list((root.parent / "incoming").iterdir()) == []


def test_a_zip_whose_end_record_understates_its_entries_gets_one_summary_line(
    editor, project, root, settings
):
    """An end record that claims fewer entries than the directory holds: the first
    ROJO_UPLOAD_ZIP_MAX_ENTRIES are unpacked and the rest are one skipped line, not one each."""
    settings.ROJO_UPLOAD_ZIP_MAX_ENTRIES = 3
    body = bytearray(zip_of(*[(f"f{n}.txt", "x") for n in range(6)]))
    end = body.rindex(b"PK\x05\x06")
    body[end + 8 : end + 12] = (3).to_bytes(2, "little") * 2  # entries on disk, in total
    response = upload(editor, project, "in", bytes(body), unpack="true")
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["extracted"] == ["f0.txt", "f1.txt", "f2.txt"]
    assert answer["skipped"] == [
        {"name": "f3.txt", "reason": "3 more entries not unpacked (the limit is 3 entries)"}
    ]


def test_zip_total_size_limit_skips_what_goes_over(editor, project, root, settings):
    settings.ROJO_UPLOAD_MAX_BYTES = 10_000
    # Text of few letters: compresses about 2.5 times, so the archive is under the limit.
    text = bytes(random.Random(1).choices(b"abcd", k=6000))
    body = zip_of(("a.bin", text), ("b.bin", text))
    assert len(body) < 10_000
    answer = upload(editor, project, "in", body, unpack="true").json()
    assert answer["extracted"] == ["a.bin"]
    assert "over its limit" in answer["skipped"][0]["reason"]


def test_zip_upload_onto_an_existing_folder_is_409_unless_replacing(editor, project, root):
    (root / "in").mkdir()
    (root / "in" / "old.txt").write_text("old")
    body = zip_of(("new.txt", "new"))
    assert upload(editor, project, "in", body, unpack="true").status_code == 409
    assert files_in(root) == {"in/old.txt": "old"}
    assert upload(editor, project, "in", body, unpack="true", overwrite="true").status_code == 200
    assert files_in(root) == {"in/new.txt": "new"}


def test_a_broken_zip_is_a_bad_request(editor, project, root):
    response = upload(editor, project, "in", b"not a zip", unpack="true")
    assert response.status_code == 400 and "zip" in response.json()["detail"]
    assert files_in(root) == {}


def test_download_a_file_as_it_is(editor, project, root):
    (root / "d").mkdir()
    (root / "d" / "x.bin").write_bytes(b"\x00\x01" * 100_000)
    response = editor.get(f"/api/projects/{project.pk}/files/download", params={"path": "d/x.bin"})
    assert response.status_code == 200
    assert response.content == b"\x00\x01" * 100_000
    assert response.headers["content-disposition"] == "attachment; filename*=UTF-8''x.bin"


def test_download_a_folder_and_the_project_as_zip(client_for, users, project, root):
    """A viewer downloads too; links and what they point at outside are left out."""
    viewer = client_for(users["viewer"])
    (root / "docs" / "sub").mkdir(parents=True)
    (root / "docs" / "a.md").write_text("A")
    (root / "docs" / "sub" / "b.md").write_text("B")
    (root / "top.txt").write_text("T")
    (root / "docs" / "passwd").symlink_to("/etc/passwd")
    folder = viewer.get(f"/api/projects/{project.pk}/files/download", params={"path": "docs"})
    assert folder.status_code == 200 and folder.headers["content-type"] == "application/zip"
    with zipfile.ZipFile(io.BytesIO(folder.content)) as archive:
        assert sorted(archive.namelist()) == ["a.md", "sub/b.md"]
        assert archive.read("sub/b.md") == b"B"
    whole = viewer.get(f"/api/projects/{project.pk}/files/download")
    with zipfile.ZipFile(io.BytesIO(whole.content)) as archive:
        assert sorted(archive.namelist()) == ["docs/a.md", "docs/sub/b.md", "top.txt"]


def test_download_of_another_project_or_a_missing_path_is_404(client_for, users, project, root):
    outsider = client_for(users["outsider"])
    url = f"/api/projects/{project.pk}/files/download"
    assert outsider.get(url).status_code == 404
    missing = client_for(users["editor"]).get(url, params={"path": "nope.txt"})
    assert missing.status_code in (400, 404)
    assert client_for(users["editor"]).get(url, params={"path": "../x"}).status_code == 400


def test_paths_over_the_depth_limit_are_refused_for_uploads_folders_and_zip_entries(
    editor, project, root
):
    """An upload path, a new folder and a zip entry (counted from the folder it goes
    into) over 64 names deep are each refused with the limit named, and nothing is made."""
    deep = "a/" * 65 + "f.txt"
    response = upload(editor, project, deep, b"x")
    assert response.status_code == 400 and "over the limit of 64" in response.json()["detail"]
    response = editor.post(f"/api/projects/{project.pk}/files/folder", json={"path": "a/" * 70})
    assert response.status_code == 400 and "over the limit of 64" in response.json()["detail"]
    body = zip_of(("ok.txt", "ok"), ("b/" * 63 + "f.txt", "deep"))
    answer = upload(editor, project, "in/side", body, unpack="true").json()
    assert answer["extracted"] == ["ok.txt"]
    assert "over the limit of 64" in answer["skipped"][0]["reason"]
    assert files_in(root) == {"in/side/ok.txt": "ok"}
