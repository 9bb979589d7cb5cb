"""Read-only file endpoints for the file browser, and the project's live stream; every path
goes through the storage gate."""

import asyncio
from urllib.parse import quote

from django.conf import settings
from django.http import HttpRequest, StreamingHttpResponse
from ninja import Router, Schema

from roject.identity.live_auth import checked_stream, live_access_check
from roject.identity.login_limits import client_address
from roject.members.access import aproject_access
from roject.members.live import KEEPALIVE_SECONDS, project_subscribed, sse_event

from . import storage
from .api_answers import answers
from .previews.capability import preview_capability

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


class PreviewOut(Schema):
    url: str
    size: int
    modifiedAt: str


@router.get("/{project_id}/files/preview", response=answers(PreviewOut, 400, 404, 422))
async def file_preview(request: HttpRequest, project_id: int, path: str):
    """Where a file's preview is served (`roject/previews/`), with its size and time: an
    address carrying a capability of the person's for this project, good for
    ROJO_PREVIEW_SECONDS, under which the files beside it load by their relative paths."""
    access = await aproject_access(user=request.auth, project_id=project_id)
    root = storage.project_root_create(access.project.pk)
    meta = await asyncio.to_thread(storage.path_meta, root, path)
    if meta["type"] != "file":
        raise storage.StorageError(f"{path!r} is a directory, not a file")
    asked_with = getattr(request, "api_token", None)
    session = getattr(request, "session", None) if asked_with is None else None
    token = preview_capability(
        user=request.auth,
        project_id=access.project.pk,
        address=client_address(request),
        token_id=asked_with.pk if asked_with is not None else None,
        session_key=session.session_key if session is not None else None,
    )
    clean = "/".join(quote(part) for part in path.strip("/").split("/"))
    return {
        "url": f"/preview/{token}/{clean}",
        "size": meta["size"],
        "modifiedAt": meta["modifiedAt"],
    }


@router.get("/{project_id}/live", response=answers(None, 404, 422), tags=["live"])
async def project_live(request: HttpRequest, project_id: int):
    """Server-sent events of what changes in the project, for every member's open page:
    `ready {}` once subscribed, then `files {change, paths, origin, tool, author}` after
    each recorded change to its files (by anyone: a person, a rojo, an upload, a restore).
    Comment lines keep it alive. It ends, within ROJO_LIVE_CHECK_SECONDS, once the user
    is no longer a member or active, its session is logged out, or the API token it was
    opened with is revoked or expired: checked again that often whatever the traffic
    (roject/identity/live_auth.py)."""
    access = await aproject_access(user=request.auth, project_id=project_id)
    pk = access.project.pk
    allowed = live_access_check(request, user=request.auth, project_id=pk)

    async def body():
        every = settings.ROJO_LIVE_CHECK_SECONDS
        async with project_subscribed(
            project_id=pk, keepalive=min(every, KEEPALIVE_SECONDS)
        ) as events:
            yield sse_event({"kind": "ready", "data": {}})  # what happens from now on is sent
            async for event in checked_stream(events, allowed=allowed, every=every):
                yield sse_event(event)

    response = StreamingHttpResponse(body(), content_type="text/event-stream")
    response["Cache-Control"] = "no-cache, no-transform"
    response["X-Accel-Buffering"] = "no"
    return response
