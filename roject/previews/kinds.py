"""What each kind of file is served as in a preview, and under which policy.

Only the kinds a preview shows are given their type; anything else is an opaque download
(`application/octet-stream`, never sniffed). An SVG is a picture: shown in an `<img>` it runs
nothing, and opened on its own it is under the sandbox policy like a page.
"""

from pathlib import PurePosixPath

TYPES = {
    ".html": "text/html; charset=utf-8",
    ".htm": "text/html; charset=utf-8",
    ".page": "text/html; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
    ".avif": "image/avif",
    ".ico": "image/x-icon",
    ".svg": "image/svg+xml",
    ".pdf": "application/pdf",
    ".woff": "font/woff",
    ".woff2": "font/woff2",
    ".ttf": "font/ttf",
    ".otf": "font/otf",
    ".txt": "text/plain; charset=utf-8",
    ".md": "text/plain; charset=utf-8",
    ".json": "text/plain; charset=utf-8",
}

# A page: no script, no form, no plugin, an origin of its own (`sandbox` without
# allow-same-origin); it may load the project's files beside it and nothing else.
SANDBOXED = (
    "sandbox; default-src 'none'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; "
    "font-src 'self' data:; media-src 'self'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'self'"
)
# A PDF: the browser's own viewer shows it (a sandbox would refuse the viewer); the file
# itself may load nothing.
PDF = "default-src 'none'; object-src 'self'; frame-ancestors 'self'"


def preview_type(path: str) -> tuple[str, str]:
    """(content type, Content-Security-Policy) for a file of this name."""
    suffix = PurePosixPath(path).suffix.lower()
    content_type = TYPES.get(suffix, "application/octet-stream")
    return content_type, PDF if suffix == ".pdf" else SANDBOXED
