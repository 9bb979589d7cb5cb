"""Read-only file endpoints for the file browser; every path goes through the storage gate."""

import asyncio

from django.http import HttpRequest
from ninja import Router, Schema

from . import storage
from .access import aproject_access
from .api_answers import answers

router = Router(tags=["files"])


class Entry(Schema):
    name: str
    type: str


class FileVersion(Schema):
    """What a save names as the version it started from."""

    size: int
    mtime_ns: int
    sha256: str


class FileOut(Schema):
    path: str
    text: str
    size: int
    modifiedAt: str
    version: FileVersion


@router.get("/{project_id}/files", response=answers(list[Entry], 400, 404, 422))
async def file_list(request: HttpRequest, project_id: int, path: str = ""):
    """A directory's entries, sorted by name."""
    access = await aproject_access(user=request.auth, project_id=project_id)
    return await asyncio.to_thread(
        storage.project_files_list, project_id=access.project.pk, path=path
    )


@router.get("/{project_id}/files/content", response=answers(FileOut, 400, 404, 422))
async def file_content(request: HttpRequest, project_id: int, path: str):
    """A text file's content with its size and modification time."""
    access = await aproject_access(user=request.auth, project_id=project_id)
    return await asyncio.to_thread(
        storage.project_file_show, project_id=access.project.pk, path=path
    )
