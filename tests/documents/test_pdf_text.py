"""PDFs read as text: get_text_content gives a PDF's text with a marker before each page,
cut at the read limit with a note and read on in lines; a file that is not one, or one its
reader cannot finish within its limits, is a clear tool error. Each read runs the real reader
(pypdf, in its child process) on a real file (tests/support/pdfs.py)."""

import pytest

from roject.models import Role
from rojos.tools import RojoToolContext, registry
from tests.support.helpers import error_message
from tests.support.pdfs import pdf_file


@pytest.fixture
def ctx(root) -> RojoToolContext:
    return RojoToolContext(project_id=1, project_root=root, role=Role.VIEWER)


def report(pages: int) -> bytes:
    return pdf_file([f"Chapter {n}\nThe findings of chapter {n}." for n in range(1, pages + 1)])


async def read(ctx: RojoToolContext, path: str, **args):
    return await registry.execute("get_text_content", {"path": path, **args}, ctx)


async def test_a_40_page_pdf_reads_as_its_text_with_page_markers(root, ctx):
    (root / "report.pdf").write_bytes(report(40))
    text = await read(ctx, "report.pdf")
    assert text.startswith("[page 1 of 40]\nChapter 1\nThe findings of chapter 1.\n")
    for n in range(1, 41):
        assert f"[page {n} of 40]\nChapter {n}\n" in text
    assert "[cut:" not in text


async def test_a_pdf_over_the_read_limit_is_cut_with_a_note_and_read_on_in_lines(
    root, ctx, settings
):
    settings.ROJO_MAX_READ_BYTES = 1_000
    (root / "report.pdf").write_bytes(report(40))
    text = await read(ctx, "report.pdf")
    assert len(text.encode()) <= 1_000
    assert "[page 1 of 40]" in text
    last = max(n for n in range(1, 41) if f"[page {n} of 40]\n" in text)
    assert f"[cut: pages {last + 1} to 40 of 40 not shown" in text
    assert "read on with offset and limit" in text
    # The rest, in lines of the same text: the last page is there.
    lines = await read(ctx, "report.pdf", offset=118, limit=3)
    assert lines == {
        "text": "[page 40 of 40]\nChapter 40\nThe findings of chapter 40.\n",
        "startLine": 118,
        "endLine": 120,
        "cut": False,
    }
    assert "has only 120 lines" in error_message(await read(ctx, "report.pdf", offset=121))


async def test_a_page_without_text_says_so(root, ctx):
    (root / "scan.pdf").write_bytes(pdf_file(["Cover", ""]))
    text = await read(ctx, "scan.pdf")
    assert "[page 2 of 2]\n(no text on this page: a scan or a picture)\n" in text


async def test_a_broken_pdf_is_a_clear_tool_error(root, ctx):
    (root / "broken.pdf").write_bytes(b"%PDF-1.4\n" + b"\xff\x00garbage" * 50)
    message = error_message(await read(ctx, "broken.pdf"))
    assert message.startswith("'broken.pdf': it is not a PDF pypdf can read")


async def test_a_reader_past_its_memory_is_stopped_and_reported(root, ctx, settings):
    """The child's own limit of address space: too small to even load the reader, it stops,
    and the read is refused with the limits named, the server unharmed."""
    settings.ROJO_PDF_MEMORY_BYTES = 40 * 1024 * 1024
    (root / "report.pdf").write_bytes(report(3))
    message = error_message(await read(ctx, "report.pdf"))
    assert "could not be read within 20 s and 40 MiB" in message
    settings.ROJO_PDF_MEMORY_BYTES = 1024 * 1024 * 1024
    assert "[page 3 of 3]" in await read(ctx, "report.pdf")


async def test_a_pdf_over_its_size_limit_is_refused(root, ctx, settings):
    settings.ROJO_MAX_PDF_BYTES = 500
    (root / "report.pdf").write_bytes(report(3))
    assert "over the 500-byte limit for PDFs" in error_message(await read(ctx, "report.pdf"))


async def test_a_text_file_that_names_the_header_stays_text(root, ctx):
    (root / "notes.md").write_text("Every PDF starts with %PDF-1.7, as the spec says.\n")
    assert await read(ctx, "notes.md") == "Every PDF starts with %PDF-1.7, as the spec says.\n"
