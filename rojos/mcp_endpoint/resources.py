"""The project's files as MCP resources, `rojo://files/<path>`, read through the storage
gate within ROJO_MAX_READ_BYTES, as the file browser reads them.

A file's MIME type is its name's (Python's own table, not the host's /etc/mime.types: every
server process of an installation says the same), or, for a name that says nothing, what its
first bytes look like: text/plain for UTF-8 without NUL bytes (the gate's rule for text),
application/octet-stream otherwise. The listing and a read give the same type. A read
gives a file of a textual type as text when it is such UTF-8, and anything else as a base64
blob, as MCP asks of binary contents.
"""

import base64
import codecs
import mimetypes
from collections import deque
from pathlib import PurePosixPath
from urllib.parse import quote, unquote

import mcp_types as types

from roject.storage import StorageError, project_file_read, project_files_list

URI_PREFIX = "rojo://files/"
TEMPLATE = types.ResourceTemplate(
    name="file",
    title="A file of the project",
    uri_template=URI_PREFIX + "{+path}",
    description=(
        "A file of the project, by its path relative to the project's root: text as text, "
        "any other file as a base64 blob."
    ),
)
# A listing is for browsing: past these, read by path (the template) or list_files.
MAX_LISTED = 500
MAX_SCANNED = 5000
# How much of a file whose name gives no type is looked at to tell text from binary.
SNIFF_BYTES = 4096
# Types outside text/* whose contents are text (a suffix +json or +xml is too).
_TEXTUAL = frozenset(
    {
        "application/json",
        "application/xml",
        "application/javascript",
        "application/sql",
        "application/toml",
        "application/yaml",
        "application/x-sh",
        "application/x-tex",
        "application/x-latex",
    }
)

# Python's own table only (mimetypes.init reads the host's /etc/mime.types, so two server
# processes could say two types), with what it lacks or misnames for a project's files:
# TypeScript is not video/mp2t, and 3.11 knows no Markdown, WebP or YAML.
_TYPES = mimetypes.MimeTypes()
for _type, _suffixes in {
    "text/x-typescript": (".ts", ".tsx", ".mts", ".cts"),
    "text/markdown": (".md", ".markdown"),
    "application/yaml": (".yaml", ".yml"),
    "application/toml": (".toml",),
    "image/webp": (".webp",),
    "image/avif": (".avif",),
}.items():
    for _suffix in _suffixes:
        _TYPES.add_type(_type, _suffix)


def _uri(path: str) -> str:
    return URI_PREFIX + quote(path)


def _looks_like_text(head: bytes) -> bool:
    """Whether a file's first bytes are UTF-8 without NUL (a cut character at the end is)."""
    try:
        codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
    except UnicodeDecodeError:
        return False
    return b"\x00" not in head


def _textual(mime: str) -> bool:
    return mime.startswith("text/") or mime in _TEXTUAL or mime.endswith(("+json", "+xml"))


def _sniffed_mime(head: bytes) -> str:
    """The type of a file whose name gives none, by its first bytes."""
    return "text/plain" if _looks_like_text(head[:SNIFF_BYTES]) else "application/octet-stream"


def _listed_mime(project_id: int, path: str) -> str:
    """(Blocking) A listed file's type: by its name, else by its first bytes."""
    if guessed := _TYPES.guess_type(path)[0]:
        return guessed
    try:
        head = project_file_read(project_id=project_id, path=path, head=SNIFF_BYTES)
    except StorageError:  # gone, or no file to read: a read says why
        return "application/octet-stream"
    return _sniffed_mime(head)


def resources_list(*, project_id: int) -> list[types.Resource]:
    """(Blocking) The project's files, breadth first, at most MAX_LISTED of them."""
    found: list[types.Resource] = []
    pending, scanned = deque([""]), 0
    while pending and len(found) < MAX_LISTED and scanned < MAX_SCANNED:
        directory = pending.popleft()
        try:
            entries = project_files_list(project_id=project_id, path=directory)
        except StorageError:
            continue
        for entry in entries:
            scanned += 1
            path = str(PurePosixPath(directory) / entry["name"]) if directory else entry["name"]
            if entry["type"] == "directory":
                pending.append(path)
            elif len(found) < MAX_LISTED:
                mime = _listed_mime(project_id, path)
                found.append(types.Resource(name=path, uri=_uri(path), mime_type=mime))
    return found


def resource_path(uri: str) -> str | None:
    """The project path a resource URI names, or None for a URI that is not ours."""
    if not uri.startswith(URI_PREFIX) or len(uri) == len(URI_PREFIX):
        return None
    return unquote(uri[len(URI_PREFIX) :])


def _text(data: bytes) -> str | None:
    if b"\x00" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def resource_read(*, project_id: int, uri: str, path: str) -> types.ReadResourceResult:
    """(Blocking) One file's contents: text, or a base64 blob; StorageError for one that
    cannot be read."""
    data = project_file_read(project_id=project_id, path=path)
    mime = _TYPES.guess_type(path)[0] or _sniffed_mime(data)
    text = _text(data) if _textual(mime) else None
    if text is not None:
        contents = types.TextResourceContents(uri=uri, mime_type=mime, text=text)
    else:
        blob = base64.b64encode(data).decode("ascii")
        contents = types.BlobResourceContents(uri=uri, mime_type=mime, blob=blob)
    return types.ReadResourceResult(contents=[contents])
