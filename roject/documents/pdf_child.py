"""The child process that reads a PDF's text:
`python -I pdf_child.py MAX_CHARS SECONDS MEMORY_BYTES`.

The PDF's bytes come on stdin; one JSON object goes to stdout: `{"pages": [text, ...],
"count": N}`, the text of the first pages until MAX_CHARS characters are drawn (the count is
every page's), or `{"error": "..."}` for a file pypdf cannot read. It imports no Django and
nothing of the project's. It sets its own limits of CPU time and address space before it reads
anything (not the parent, through `preexec_fn`, which is unsafe in a threaded server): past
them the kernel stops it, and the parent reports the PDF as unreadable.
"""

import json
import logging
import resource
import sys


def pages_read(data: bytes, *, max_chars: int) -> dict:
    from io import BytesIO

    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            return {"error": "it is encrypted with a password"}
        count, pages, drawn = len(reader.pages), [], 0
        for page in reader.pages:
            if drawn > max_chars:
                break
            text = page.extract_text() or ""
            pages.append(text)
            drawn += len(text)
    except (PdfReadError, ValueError, KeyError, TypeError, IndexError) as exc:
        return {"error": f"it is not a PDF pypdf can read ({type(exc).__name__})"}
    return {"pages": pages, "count": count}


def main() -> None:
    max_chars, seconds, memory = map(int, sys.argv[1:4])
    resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds + 1))
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    logging.disable(logging.WARNING)  # pypdf warns about every odd object on stderr
    found = pages_read(sys.stdin.buffer.read(), max_chars=max_chars)
    sys.stdout.write(json.dumps(found))


if __name__ == "__main__":
    main()
