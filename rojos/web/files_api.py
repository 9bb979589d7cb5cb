"""People's changes to a project's files: thin endpoints over rojos/changes/file_actions.py.

Reading the tree and a file's text is roject/files_api.py's; what changes files lives here,
beside the change ledger. Every endpoint needs a role that writes (viewers get 403, other
projects 404) and a CSRF token, like every state change of the API.
"""

import asyncio
import functools
from datetime import datetime
from pathlib import PurePosixPath
from urllib.parse import quote

from asgiref.sync import sync_to_async
from django.http import Http404, HttpRequest, StreamingHttpResponse
from ninja import Field, Router, Schema

from roject import storage
from roject.api_answers import answers
from roject.audit.log import AuditAction, aaudit_record, audit_actor
from roject.members.access import aproject_access, object_id
from roject.server.streaming import blocking_stream
from roject.server.upload_gate import upload_preflight
from rojos.changes import deleted_files as deleted
from rojos.changes import file_actions
from rojos.changes import file_history as history
from rojos.models import FileChange

router = Router(tags=["files"])


class PathIn(Schema):
    path: str


class NewFileIn(Schema):
    path: str
    text: str = ""


class MoveIn(Schema):
    source: str
    destination: str
    overwrite: bool = False


class Version(Schema):
    size: int
    mtime_ns: int
    sha256: str


class SaveIn(Schema):
    path: str
    text: str
    base: Version | None = Field(
        description="The version the editor loaded (from GET …/files/content); null for a "
        "file that did not exist. A save from another version answers 409 with the current."
    )


class ChangeOut(Schema):
    change: int | None = Field(description="The recorded change; null when nothing changed.")
    paths: list[str]


def _changed(result) -> dict:
    _, change = result
    return {"change": change.pk if change else None, "paths": change.paths if change else []}


async def _writer(request: HttpRequest, project_id: int):
    return await aproject_access(user=request.auth, project_id=project_id, write=True)


async def _change(request: HttpRequest, project_id: int, action, **arguments) -> dict:
    """A file_actions service run by the request's user on a project they may write, so that
    every endpoint checks access and answers the recorded change the same way."""
    access = await _writer(request, project_id)
    return _changed(await action(project_id=access.project.pk, user=request.auth, **arguments))


WRITE_ANSWERS = answers(ChangeOut, 400, 403, 404, 409, 422)


@router.post("/{project_id}/files/new", response=WRITE_ANSWERS)
async def file_new(request: HttpRequest, project_id: int, payload: NewFileIn):
    """Create a text file; 409 when the path is taken."""
    return await _change(
        request, project_id, file_actions.file_new, path=payload.path, text=payload.text
    )


@router.post("/{project_id}/files/folder", response=WRITE_ANSWERS)
async def folder_new(request: HttpRequest, project_id: int, payload: PathIn):
    """Create a folder (and its missing parents); 409 when the path is taken."""
    return await _change(request, project_id, file_actions.folder_new, path=payload.path)


@router.post("/{project_id}/files/move", response=WRITE_ANSWERS)
async def path_move(request: HttpRequest, project_id: int, payload: MoveIn):
    """Rename or move a file or folder; an existing destination only with `overwrite`."""
    return await _change(
        request,
        project_id,
        file_actions.path_move,
        source=payload.source,
        destination=payload.destination,
        overwrite=payload.overwrite,
    )


@router.post("/{project_id}/files/delete", response=WRITE_ANSWERS)
async def path_delete(request: HttpRequest, project_id: int, payload: PathIn):
    """Delete a file, or a folder with everything in it; undoable like any change."""
    actor = audit_actor(request, user=request.auth)
    return await _change(
        request, project_id, file_actions.path_delete, path=payload.path, actor=actor
    )


@router.post("/{project_id}/files/save", response=WRITE_ANSWERS)
async def file_save(request: HttpRequest, project_id: int, payload: SaveIn):
    """Save a text file from the editor, unless it changed since the editor loaded it
    (409 with `current`, the version now, and `currentText`, for a merge view)."""
    base = payload.base.dict() if payload.base else None
    return await _change(
        request, project_id, file_actions.file_save, path=payload.path, text=payload.text, base=base
    )


class UploadOut(ChangeOut):
    extracted: list[str] = Field(default_factory=list, description="Unpacked from a .zip.")
    skipped: list[dict] = Field(
        default_factory=list, description="Entries of a .zip not unpacked: {name, reason}."
    )


def _length(request: HttpRequest) -> int | None:
    value = request.headers.get("Content-Length", "")
    return int(value) if value.isascii() and value.isdigit() else None


@router.post("/{int:project_id}/files/upload", response=answers(UploadOut, 400, 403, 404, 409, 413))
async def file_upload(
    request: HttpRequest, project_id: int, path: str, overwrite: bool = False, unpack: bool = False
):
    """Upload one file as the request's body (`application/octet-stream`) to `path`.

    An existing file is replaced only with `overwrite` (else 409). With `unpack`, the body
    is a .zip unpacked into the folder `path`: entries that climb out, absolute names,
    links, special files and likely zip bombs are skipped and listed in `skipped`.
    """
    access = await _writer(request, project_id)
    if (go_ahead := upload_preflight(request)) is not None:
        return go_ahead  # the ASGI gate asked, before the body came (roject/server/upload_gate.py)
    upload = {"project_id": access.project.pk, "user": request.auth, "overwrite": overwrite}
    upload.update(read=request.read, length=_length(request))
    if not unpack:
        return _changed(await file_actions.file_upload(path=path, **upload))
    result, unpacked = await file_actions.zip_upload(folder=path, **upload)
    return {**_changed(result), "extracted": unpacked.extracted, "skipped": unpacked.skipped}


class HistoryEntry(Schema):
    change: int
    origin: str
    tool: str
    author: str | None
    created: datetime
    paths: list[str]
    diff: str
    conversation: int | None
    undone: datetime | None
    restorable: bool = Field(description="The version before this change can be restored.")
    versionFrom: int | None = Field(
        description="Restore the version this change left by restoring with this change "
        "(the next newer one, which kept a copy of it); null for the file as it is now."
    )


@router.get("/{project_id}/files/history", response=answers(list[HistoryEntry], 404, 422))
async def file_history(request: HttpRequest, project_id: int, path: str):
    """Every recorded change to a file, newest first: by a person, a rojo, MCP, an upload."""
    access = await aproject_access(user=request.auth, project_id=project_id)
    return await sync_to_async(history.file_history)(project_id=access.project.pk, path=path)


async def _project_change(access, change_id: int) -> FileChange:
    """A change of the project, or 404: another project's change is not told apart."""
    change = await FileChange.objects.filter(
        pk=object_id(change_id, "change"), project_id=access.project.pk
    ).afirst()
    if change is None:
        raise Http404("No such change.")
    return change


class RestoreIn(Schema):
    change: int = Field(description="A change from the file's history.")
    path: str


@router.post("/{project_id}/files/restore", response=WRITE_ANSWERS)
async def version_restore(request: HttpRequest, project_id: int, payload: RestoreIn):
    """Put a file back as it was before a change of its history; itself a recorded change."""
    access = await _writer(request, project_id)
    change = await _project_change(access, payload.change)
    return _changed(
        await file_actions.version_restore(
            change=change,
            path=payload.path,
            user=request.auth,
            actor=audit_actor(request, user=request.auth),
        )
    )


class DeletedEntry(Schema):
    change: int
    paths: list[str]
    origin: str
    author: str | None
    created: datetime
    conversation: int | None


@router.get("/{project_id}/files/deleted", response=answers(list[DeletedEntry], 404))
async def deleted_files(request: HttpRequest, project_id: int):
    """Recently deleted: the deletions whose paths are still absent, newest first."""
    access = await aproject_access(user=request.auth, project_id=project_id)
    return await sync_to_async(deleted.deleted_files_list)(project_id=access.project.pk)


class DeletedRestoreIn(Schema):
    change: int = Field(description="A deletion from …/files/deleted.")


@router.post("/{project_id}/files/deleted/restore", response=WRITE_ANSWERS)
async def deleted_file_restore(request: HttpRequest, project_id: int, payload: DeletedRestoreIn):
    """Put a deleted file or folder back by undoing its deletion; 409 when the path exists
    again (it is never overwritten)."""
    access = await _writer(request, project_id)
    change = await _project_change(access, payload.change)
    await deleted.deleted_file_restore(
        change=change, user=request.auth, actor=audit_actor(request, user=request.auth)
    )
    return {"change": change.pk, "paths": change.paths}


@router.get("/{project_id}/files/download", response=answers(None, 400, 404, 422))
async def download(request: HttpRequest, project_id: int, path: str = ""):
    """A file as it is, or a folder (`path` empty: the whole project) as a .zip, streamed."""
    access = await aproject_access(user=request.auth, project_id=project_id)
    root = storage.project_root_create(access.project.pk)
    kind = "directory" if path.strip("/") in ("", ".") else None
    if kind is None:
        kind = (await asyncio.to_thread(storage.path_meta, root, path))["type"]
    name = PurePosixPath(path.strip("/")).name or access.project.slug
    if kind == "directory":
        produce = functools.partial(storage.zip_write, root, path.strip("/"))
        name, content_type = name + ".zip", "application/zip"
        folder = path.strip("/") or "/"
        await aaudit_record(
            action=AuditAction.EXPORT,
            actor=audit_actor(request, user=request.auth),
            project=access.project,
            object_type="folder",
            object_id=folder,
            object_repr=folder,
            details={"format": "zip"},
        )
    else:
        # Opened before the response: what the gate refuses to read is a 400 with its reason.
        produce = await asyncio.to_thread(storage.file_download_open, root, path)
        content_type = "application/octet-stream"
    response = StreamingHttpResponse(blocking_stream(produce), content_type=content_type)
    response["Content-Disposition"] = f"attachment; filename*=UTF-8''{quote(name)}"
    response["Cache-Control"] = "no-store"
    return response
