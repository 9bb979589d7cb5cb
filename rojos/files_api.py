"""People's changes to a project's files: thin endpoints over rojos/file_actions.py.

Reading the tree and a file's text is roject/files_api.py's; what changes files lives here,
beside the change ledger. Every endpoint needs a role that writes (viewers get 403, other
projects 404) and a CSRF token, like every state change of the API.
"""

from django.http import HttpRequest
from ninja import Field, Router, Schema

from roject.access import aproject_access
from roject.api_answers import answers

from . import file_actions

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


WRITE_ANSWERS = answers(ChangeOut, 400, 403, 404, 409, 422)


@router.post("/{project_id}/files/new", response=WRITE_ANSWERS)
async def file_new(request: HttpRequest, project_id: int, payload: NewFileIn):
    """Create a text file; 409 when the path is taken."""
    access = await _writer(request, project_id)
    return _changed(
        await file_actions.file_new(
            project_id=access.project.pk, user=request.auth, path=payload.path, text=payload.text
        )
    )


@router.post("/{project_id}/files/folder", response=WRITE_ANSWERS)
async def folder_new(request: HttpRequest, project_id: int, payload: PathIn):
    """Create a folder (and its missing parents); 409 when the path is taken."""
    access = await _writer(request, project_id)
    return _changed(
        await file_actions.folder_new(
            project_id=access.project.pk, user=request.auth, path=payload.path
        )
    )


@router.post("/{project_id}/files/move", response=WRITE_ANSWERS)
async def path_move(request: HttpRequest, project_id: int, payload: MoveIn):
    """Rename or move a file or folder; an existing destination only with `overwrite`."""
    access = await _writer(request, project_id)
    return _changed(
        await file_actions.path_move(
            project_id=access.project.pk,
            user=request.auth,
            source=payload.source,
            destination=payload.destination,
            overwrite=payload.overwrite,
        )
    )


@router.post("/{project_id}/files/delete", response=WRITE_ANSWERS)
async def path_delete(request: HttpRequest, project_id: int, payload: PathIn):
    """Delete a file, or a folder with everything in it; undoable like any change."""
    access = await _writer(request, project_id)
    return _changed(
        await file_actions.path_delete(
            project_id=access.project.pk, user=request.auth, path=payload.path
        )
    )


@router.post("/{project_id}/files/save", response=WRITE_ANSWERS)
async def file_save(request: HttpRequest, project_id: int, payload: SaveIn):
    """Save a text file from the editor, unless it changed since the editor loaded it
    (409 with `current`, the version now, and `currentText`, for a merge view)."""
    access = await _writer(request, project_id)
    base = payload.base.dict() if payload.base else None
    return _changed(
        await file_actions.file_save(
            project_id=access.project.pk,
            user=request.auth,
            path=payload.path,
            text=payload.text,
            base=base,
        )
    )
