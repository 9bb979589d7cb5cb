"""Documents read as text: a PDF's text, page by page, for the model.

What a person or the rojo reads as a file's text is plain UTF-8, except PDFs, whose text is
drawn out here (`pdf.pdf_pages`), with a marker before each page (`pdf.pdf_text`). No network
and no OCR: a scanned page has no text, and says so. The parser runs in a child process
(`pdf_child`) bounded in time and memory, because a crafted PDF can make any parser spin or
swell, and a parser sharing the server's process would hold its event loop meanwhile.
"""

from .pdf import PDF_MAGIC, DocumentError, is_pdf, pdf_pages, pdf_text

__all__ = ["PDF_MAGIC", "DocumentError", "is_pdf", "pdf_pages", "pdf_text"]
