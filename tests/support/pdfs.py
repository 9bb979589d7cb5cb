"""PDFs written byte by byte for the tests: pages of text in a standard font, as a real
writer lays them out (objects, a cross-reference table with their offsets, a trailer), so
that the reader under test parses a real file, not a stand-in."""


def pdf_file(pages: list[str]) -> bytes:
    """A PDF whose page N shows pages[N] (lines split on newlines; an empty page has none)."""
    objects: list[bytes] = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"",  # the page tree, once the pages' numbers are known
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    kids = []
    for text in pages:
        lines = [
            line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
            for line in text.splitlines()
        ]
        body = "BT /F1 11 Tf 14 TL 50 780 Td " + " ".join(f"({line}) '" for line in lines)
        stream = (body + " ET").encode("latin-1")
        objects.append(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream))
        content = len(objects)
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Contents %d 0 R "
            b"/Resources << /Font << /F1 3 0 R >> >> >>" % content
        )
        kids.append(b"%d 0 R" % len(objects))
    objects[1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (b" ".join(kids), len(kids))
    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)


def pdf_encrypted(pages: list[str], password: str) -> bytes:
    """`pdf_file(pages)` encrypted by pypdf's own writer, opened only with `password`."""
    from io import BytesIO

    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(BytesIO(pdf_file(pages))))
    writer.encrypt(user_password=password, owner_password=password, algorithm="RC4-128")
    out = BytesIO()
    writer.write(out)
    return out.getvalue()
