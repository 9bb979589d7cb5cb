"""The project's text files as MCP resources, `rojo://files/<path>`, read through the
storage gate as the file browser reads them (its size limit and UTF-8 only)."""

import mimetypes
from collections import deque
from pathlib import PurePosixPath
from urllib.parse import quote, unquote

import mcp_types as types

from roject.storage import StorageError, project_file_show, project_files_list

URI_PREFIX = "rojo://files/"
TEMPLATE = types.ResourceTemplate(
    name="file",
    title="A file of the project",
    uri_template=URI_PREFIX + "{+path}",
    description="A text file of the project, by its path relative to the project's root.",
)
# A listing is for browsing: past these, read by path (the template) or list_files.
MAX_LISTED = 500
MAX_SCANNED = 5000


def _uri(path: str) -> str:
    return URI_PREFIX + quote(path)


def _mime(path: str) -> str:
    return mimetypes.guess_type(path)[0] or "text/plain"


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
                found.append(types.Resource(name=path, uri=_uri(path), mime_type=_mime(path)))
    return found


def resource_path(uri: str) -> str | None:
    """The project path a resource URI names, or None for a URI that is not ours."""
    if not uri.startswith(URI_PREFIX) or len(uri) == len(URI_PREFIX):
        return None
    return unquote(uri[len(URI_PREFIX) :])


def resource_read(*, project_id: int, uri: str, path: str) -> types.ReadResourceResult:
    """(Blocking) One file's text; StorageError for one that cannot be read or shown."""
    shown = project_file_show(project_id=project_id, path=path)
    contents = types.TextResourceContents(uri=uri, mime_type=_mime(path), text=shown["text"])
    return types.ReadResourceResult(contents=[contents])
