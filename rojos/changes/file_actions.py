"""What people do to a project's files from the file panel, each one recorded change.

Each action states its precondition as a check run under the change lock (the path free,
the file still at the version the editor loaded), then runs through file_change_make.
"""

import asyncio

from django.conf import settings

from roject import storage
from roject.audit.log import AuditAction, AuditActor
from rojos.changes.ledger import EntryExists, VersionConflict, file_change_make, file_tool_run
from rojos.changes.undo import UndoRefused, snapshot_for
from rojos.models import FileChange

Origin = FileChange.Origin
UNDONE = "that change was undone, and its copy of the file with it"


def _text_or_none(root, path: str) -> str | None:
    try:
        return storage.read_project_file(root, path)
    except storage.StorageError:
        return None


def _free(path: str):
    def check(root) -> None:
        if storage.entry_exists(root, path):
            raise EntryExists(f"{path!r} exists already")

    return check


async def file_new(*, project_id: int, user, path: str, text: str = ""):
    """A new text file; refused (EntryExists) when the path is taken."""
    return await file_tool_run(
        project_id=project_id,
        user=user,
        tool_name="write_text_content",
        args={"path": path, "text": text},
        check=_free(path),
    )


async def folder_new(*, project_id: int, user, path: str):
    """A new folder (and its missing parents); refused when the path is taken."""
    return await file_tool_run(
        project_id=project_id,
        user=user,
        tool_name="create_directory",
        args={"path": path},
        check=_free(path),
    )


async def path_move(*, project_id: int, user, source: str, destination: str, overwrite=False):
    """Rename or move a file or folder; an existing destination only with `overwrite`."""
    args = {"source": source, "destination": destination, "overwrite": overwrite}
    return await file_tool_run(project_id=project_id, user=user, tool_name="move_path", args=args)


async def path_delete(*, project_id: int, user, path: str, actor: AuditActor | None = None):
    """Delete a file, or a folder with everything in it (the page asked for confirmation);
    audited, by `actor` (default: `user`)."""
    return await file_tool_run(
        project_id=project_id,
        user=user,
        tool_name="delete_path",
        args={"path": path, "recursive": True},
        audited=(AuditAction.FILE_DELETED, actor or AuditActor(user=user)),
    )


async def file_save(*, project_id: int, user, path: str, text: str, base: dict | None):
    """Save the editor's text, if the file is still at the version the editor loaded
    (`base`; None for a file that did not exist); else VersionConflict with the current one."""

    def check(root) -> None:
        current = storage.file_version(root, path)
        if not storage.same_version(current, base):
            raise VersionConflict(
                f"{path!r} changed since you opened it; merge the changes, then save again",
                current=current,
                text=_text_or_none(root, path),
            )

    return await file_tool_run(
        project_id=project_id,
        user=user,
        tool_name="write_text_content",
        args={"path": path, "text": text},
        check=check,
    )


async def version_restore(*, change: FileChange, path: str, user, actor: AuditActor | None = None):
    """Put `path` back as it was before `change`: itself a recorded change (origin restore),
    audited, by `actor` (default: `user`)."""
    if path not in change.paths:
        raise UndoRefused(f"that change did not touch {path!r}")
    if change.undone is not None:
        raise UndoRefused(UNDONE)
    number = change.paths.index(path)
    snapshot = snapshot_for(change)

    def check(root) -> None:  # an undo may have taken the copy since the change was read
        if FileChange.objects.filter(pk=change.pk, undone__isnull=False).exists():
            raise UndoRefused(UNDONE)

    async def work():
        root = storage.project_root_create(change.project_id)
        await asyncio.to_thread(storage.snapshot_path_restore, root, snapshot, number)

    return await file_change_make(
        project_id=change.project_id,
        user=user,
        origin=Origin.RESTORE,
        tool="restore",
        paths=[path],
        work=work,
        check=check,
        audited=(AuditAction.RESTORE, actor or AuditActor(user=user)),
    )


def _limits_upload(length: int | None, limit: int) -> None:
    if length is not None and length > limit:
        raise storage.TooLarge(f"the upload is {length:,} bytes, over the limit of {limit:,}")


async def file_upload(
    *, project_id: int, user, path: str, read, length: int | None, overwrite: bool = False
):
    """Receive an upload (`read(n)` gives its bytes) into the gate, then move it to `path`
    as one recorded change (origin upload). An existing file is replaced only with
    `overwrite`; the limits are ROJO_UPLOAD_MAX_FILE_BYTES and ROJO_UPLOAD_MAX_BYTES."""
    limit = min(settings.ROJO_UPLOAD_MAX_FILE_BYTES, settings.ROJO_UPLOAD_MAX_BYTES)
    _limits_upload(length, limit)
    incoming = await asyncio.to_thread(
        storage.upload_receive, project_id=project_id, read=read, max_bytes=limit
    )
    try:
        return await _place(project_id, user, path, incoming, overwrite, tool="upload")
    finally:
        await asyncio.to_thread(storage.incoming_discard, incoming)


async def _place(project_id, user, path, incoming, overwrite, *, tool: str):
    root = storage.project_root_create(project_id)

    async def work():
        await asyncio.to_thread(storage.upload_place, root, path, incoming, overwrite=overwrite)

    return await file_change_make(
        project_id=project_id,
        user=user,
        origin=Origin.UPLOAD,
        tool=tool,
        paths=[path],
        work=work,
        check=None if overwrite else _free(path),
    )


async def zip_upload(
    *, project_id: int, user, folder: str, read, length: int | None, overwrite: bool = False
):
    """Receive a .zip and unpack it into `folder` (new, or replaced with `overwrite`) as one
    recorded change; returns it with the names unpacked and those skipped, with why."""
    limit = settings.ROJO_UPLOAD_MAX_BYTES
    _limits_upload(length, limit)
    archive = await asyncio.to_thread(
        storage.upload_receive, project_id=project_id, read=read, max_bytes=limit
    )
    limits = storage.ZipLimits(
        max_file_bytes=settings.ROJO_UPLOAD_MAX_FILE_BYTES,
        max_total_bytes=limit,
        max_ratio=settings.ROJO_UPLOAD_ZIP_MAX_RATIO,
        max_entries=settings.ROJO_UPLOAD_ZIP_MAX_ENTRIES,
        folder=folder.strip("/"),
    )
    try:
        unpacked = await asyncio.to_thread(
            storage.zip_unpack, project_id=project_id, archive_file=archive, limits=limits
        )
    finally:
        await asyncio.to_thread(storage.incoming_discard, archive)
    try:
        result = await _place(project_id, user, folder, unpacked.incoming, overwrite, tool="unzip")
    finally:
        await asyncio.to_thread(storage.incoming_discard, unpacked.incoming)
    return result, unpacked
