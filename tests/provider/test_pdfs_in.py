"""PDFs in the message box: uploaded once their reader opens them (within the size limit,
a PDF by its bytes), their text with `[page N of M]` markers sent to any model with the
message, within the read limit, as an `@`-mentioned PDF is; listed with the message and
downloaded back, by members of the project only; gone with the last conversation that
shows them."""

import pytest

from roject.members.projects import project_create
from rojos.models import Conversation
from tests.support.fake_provider import stream, text_chunks
from tests.support.helpers import make_rojo
from tests.support.pdfs import pdf_encrypted, pdf_file

pytestmark = pytest.mark.django_db(transaction=True)

RAW = {"Content-Type": "application/octet-stream"}
REPORT = pdf_file(["Summary\nSales rose.", "Details\nIn March."])


def upload(client, project_id: int, body: bytes, name: str = "report.pdf"):
    return client.post(
        f"/api/projects/{project_id}/pdfs", content=body, headers=RAW, params={"name": name}
    )


def last_user(request: dict) -> str:
    return [m["content"] for m in request["messages"] if m["role"] == "user"][-1]


def test_an_uploaded_pdf_goes_to_any_model_as_its_text_with_page_markers(
    client_for, users, project, fake_provider
):
    """No vision needed: the rojo says nothing about images, and the text goes as text."""
    rojo = make_rojo(fake_provider.base_url)
    fake_provider.add(stream(*text_chunks("Sales rose.")), stream(*text_chunks("March.")))
    editor = client_for(users["editor"])
    uploaded = upload(editor, project.pk, REPORT, name="../Q1 report.pdf")
    assert uploaded.status_code == 200, uploaded.text
    pdf = uploaded.json()
    assert pdf["name"] == "Q1 report.pdf" and pdf["pages"] == 2 and pdf["size"] == len(REPORT)
    assert pdf["type"] == "application/pdf"

    events = editor.chat(
        project.pk,
        rojo=rojo.slug,
        message="What rose?",
        pdfs=[{"sha256": pdf["sha256"], "name": pdf["name"]}],
    )

    assert events[-1].type == "DONE"
    text = (
        '<attached-file name="Q1 report.pdf">\n[page 1 of 2]\nSummary\nSales rose.\n'
        "[page 2 of 2]\nDetails\nIn March.\n\n</attached-file>"
    )
    assert last_user(fake_provider.requests[0]) == f"What rose?\n\n{text}"
    conversation = events[0].data["conversation"]
    detail = editor.get(f"/api/conversations/{conversation}").json()
    asked = next(m for m in detail["messages"] if m["role"] == "user")
    assert asked["pdfs"] == [pdf] and asked["images"] == [] and asked["attachments"] == []
    # The next request sends the history's PDF text again, as the model first saw it.
    editor.chat(project.pk, rojo=rojo.slug, message="And when?", conversation=conversation)
    first_user = next(m for m in fake_provider.requests[1]["messages"] if m["role"] == "user")
    assert first_user["content"] == f"What rose?\n\n{text}"
    exported = editor.get(f"/api/conversations/{conversation}/export").json()
    stored = next(m for m in exported["messages"] if m["role"] == "user")
    assert stored["extra"]["pdfs"][0]["sha256"] == pdf["sha256"]
    assert "[page 2 of 2]" in stored["extra"]["pdfs"][0]["text"]
    transcript = editor.get(f"/api/conversations/{conversation}/export?format=markdown").text
    assert f"`Q1 report.pdf`, PDF, 2 pages, {len(REPORT):,} bytes" in transcript


def test_the_pdf_downloads_under_its_name_and_never_as_a_page(client_for, users, project):
    viewer = client_for(users["viewer"])
    sha256 = upload(viewer, project.pk, REPORT).json()["sha256"]

    served = viewer.get(
        f"/api/projects/{project.pk}/pdfs/{sha256}", params={"name": 'Q1 "final".pdf'}
    )

    assert served.status_code == 200 and served.content == REPORT
    assert served.headers["content-type"] == "application/pdf"
    assert served.headers["x-content-type-options"] == "nosniff"
    assert served.headers["content-security-policy"] == "default-src 'none'; sandbox"
    assert served.headers["content-disposition"] == (
        "attachment; filename*=UTF-8''Q1%20%22final%22.pdf"
    )


def test_a_pdf_over_the_size_limit_not_a_pdf_broken_or_encrypted_is_refused_and_not_kept(
    client_for, users, project, fake_provider, settings
):
    editor = client_for(users["editor"])
    settings.ROJO_MAX_PDF_BYTES = len(REPORT) - 1
    over = upload(editor, project.pk, REPORT)
    assert over.status_code == 413 and "over the limit" in over.text
    settings.ROJO_MAX_PDF_BYTES = 1 << 20
    # Bytes that are no PDF, whatever their name says.
    named = upload(editor, project.pk, b"<html><script>alert(1)</script></html>", "x.pdf")
    assert named.status_code == 400 and "'x.pdf' is not a PDF" in named.text
    broken = upload(editor, project.pk, b"%PDF-1.4\nnothing else", "broken.pdf")
    assert broken.status_code == 400 and "'broken.pdf': it is not a PDF pypdf can read" in (
        broken.text
    )
    locked = upload(editor, project.pk, pdf_encrypted(["secret"], "pw"), "locked.pdf")
    assert locked.status_code == 400 and "'locked.pdf': it is encrypted with a password" in (
        locked.text
    )
    kept = settings.ROJO_STORAGE_DIR / str(project.pk) / "pdfs"
    assert not kept.exists() or list(kept.iterdir()) == []
    assert fake_provider.requests == []


def test_too_many_pdfs_or_an_unknown_one_is_refused_before_any_request(
    client_for, users, project, fake_provider, settings
):
    rojo = make_rojo(fake_provider.base_url)
    editor = client_for(users["editor"])
    settings.ROJO_MAX_PDFS_PER_MESSAGE = 1
    pdfs = [
        {"sha256": upload(editor, project.pk, body).json()["sha256"], "name": "a.pdf"}
        for body in (REPORT, pdf_file(["Other"]))
    ]
    chat = f"/api/projects/{project.pk}/chat"
    too_many = editor.post(chat, json={"rojo": rojo.slug, "message": "x", "pdfs": pdfs})
    assert too_many.status_code == 400 and "at most 1 PDFs" in too_many.text
    unknown = editor.post(
        chat,
        json={"rojo": rojo.slug, "message": "x", "pdfs": [{"sha256": "0" * 64, "name": "a.pdf"}]},
    )
    assert unknown.status_code == 400 and "no PDF" in unknown.text
    assert fake_provider.requests == []
    assert not Conversation.objects.exists()


def test_the_pdfs_text_is_cut_with_a_note_within_the_read_limit_left_by_the_files_before_it(
    client_for, users, project, fake_provider, settings
):
    """The message's files and PDFs share ROJO_MAX_READ_BYTES, as `@`-mentioned files do."""
    settings.ROJO_MAX_READ_BYTES = 2_000
    pages = [f"Chapter {n}\nFindings of chapter {n}." for n in range(1, 41)]
    rojo = make_rojo(fake_provider.base_url)
    fake_provider.add(stream(*text_chunks("Read.")))
    editor = client_for(users["editor"])
    sha256 = upload(editor, project.pk, pdf_file(pages), "book.pdf").json()["sha256"]

    events = editor.chat(
        project.pk, rojo=rojo.slug, message="Read", pdfs=[{"sha256": sha256, "name": "book.pdf"}]
    )

    assert events[-1].type == "DONE"
    sent = last_user(fake_provider.requests[0])
    assert '<attached-file name="book.pdf">\n[page 1 of 40]\nChapter 1\n' in sent
    assert "[page 40 of 40]" not in sent
    assert "of 40 not shown, over the 2,000-byte read limit]" in sent
    assert "get_text_content" not in sent  # not a project file: nothing to read on with


def test_another_projects_member_can_neither_upload_download_nor_attach_it(
    client_for, users, project, fake_provider
):
    elsewhere = project_create(name="Elsewhere", owner=users["outsider"])
    outsider = client_for(users["outsider"])
    sha256 = upload(client_for(users["viewer"]), project.pk, REPORT).json()["sha256"]

    assert upload(outsider, project.pk, REPORT).status_code == 404
    assert outsider.get(f"/api/projects/{project.pk}/pdfs/{sha256}").status_code == 404
    rojo = make_rojo(fake_provider.base_url)
    borrowed = outsider.post(
        f"/api/projects/{elsewhere.pk}/chat",
        json={"rojo": rojo.slug, "message": "x", "pdfs": [{"sha256": sha256, "name": "r.pdf"}]},
    )
    assert borrowed.status_code == 400 and "no PDF" in borrowed.text
    assert fake_provider.requests == []
    assert outsider.get(f"/api/projects/{elsewhere.pk}/pdfs/{sha256}").status_code == 404


def test_a_pdf_goes_with_the_last_conversation_that_shows_it(
    client_for, users, project, fake_provider
):
    rojo = make_rojo(fake_provider.base_url)
    fake_provider.add(*(stream(*text_chunks("Read.")) for _ in range(2)))
    editor = client_for(users["editor"])
    sha256 = upload(editor, project.pk, REPORT).json()["sha256"]
    chat = {"rojo": rojo.slug, "message": "Read", "pdfs": [{"sha256": sha256, "name": "r.pdf"}]}
    first = editor.chat(project.pk, **chat)[0].data["conversation"]
    second = editor.chat(project.pk, **chat)[0].data["conversation"]
    url = f"/api/projects/{project.pk}/pdfs/{sha256}"

    assert editor.http.delete(f"/api/conversations/{first}").status_code in (200, 204)
    assert editor.get(url).status_code == 200  # the second still shows it
    assert editor.http.delete(f"/api/conversations/{second}").status_code in (200, 204)
    assert editor.get(url).status_code == 404
