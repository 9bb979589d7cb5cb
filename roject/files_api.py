"""Read-only file endpoints for the file browser; every path goes through the storage gate."""

import asyncio

from django.conf import settings
from django.http import HttpRequest
from ninja import Router, Schema

from . import storage
from .access import aproject_access
from .api_answers import answers

router = Router(tags=["files"])


class Entry(Schema):
    name: str
    type: str


class FileOut(Schema):
    path: str
    text: str
    size: int
    modifiedAt: str


def _read(root, path: str) -> dict:
    meta = storage.path_meta(root, path)
    limit = settings.ROJO_MAX_READ_BYTES
    if meta.get("type") == "file" and meta["size"] > limit:  # said for people, not a model
        raise storage.StorageError(
            f"{path!r} is {meta['size']:,} bytes, too big to show here (the limit is "
            f"{limit:,} bytes)"
        )
    return {"path": path, "text": storage.read_project_file(root, path), **meta}


@router.get("/{project_id}/files", response=answers(list[Entry], 400, 404, 422))
async def file_list(request: HttpRequest, project_id: int, path: str = ""):
    """A directory's entries, sorted by name."""
    access = await aproject_access(user=request.auth, project_id=project_id)
    root = await asyncio.to_thread(storage.project_root_create, access.project.pk)
    return await asyncio.to_thread(storage.list_directory, root, path)


@router.get("/{project_id}/files/content", response=answers(FileOut, 400, 404, 422))
async def file_content(request: HttpRequest, project_id: int, path: str):
    """A text file's content with its size and modification time."""
    access = await aproject_access(user=request.auth, project_id=project_id)
    root = await asyncio.to_thread(storage.project_root_create, access.project.pk)
    result = await asyncio.to_thread(_read, root, path)
    result.pop("type", None)
    return result
