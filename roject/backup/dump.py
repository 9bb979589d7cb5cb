"""`backup`: the installation (or part of it) written as one archive, while it runs."""

import os
import uuid
from pathlib import Path
from typing import BinaryIO, Literal

from django.db import DEFAULT_DB_ALIAS, connections

from roject.storage.backups import project_entries

from .archive import ArchiveWriter
from .consistency import ChangeLocks, read_snapshot
from .errors import ArchiveExists, BackupError
from .manifest import Manifest, header_make
from .tables import (
    backed_up_models,
    columns_of,
    has_sequence,
    model_label,
    row_encoder,
    sequence_read,
)

# Which projects' storage an archive holds: all, none (the database only), or these ids.
Scope = Literal["all", "none"] | list[int]
_CHUNK_ROWS = 2000


def backup_write(
    *,
    path: Path,
    storage: Scope = "all",
    overwrite: bool = False,
    using: str = DEFAULT_DB_ALIAS,
) -> Manifest:
    """(Blocking) Write the archive to `path` (compressed when it ends in .gz or .tgz).

    It is written under a temporary name beside `path` and renamed once complete: a backup
    that fails leaves no archive that looks whole. A file already at `path` (an older
    backup) is replaced only when `overwrite`; else it is left as it was, even one made
    there while this backup ran. Returns its manifest.
    """
    path = Path(path)
    partial = path.with_name(f".{path.name}.{uuid.uuid4().hex}.partial")
    compress = path.name.endswith((".gz", ".tgz"))
    try:
        with partial.open("xb") as out:
            manifest = backup_stream(out, storage=storage, compress=compress, using=using)
            out.flush()
            os.fsync(out.fileno())
        if overwrite:
            os.replace(partial, path)
        else:
            _rename_unless_taken(partial, path)
    finally:
        partial.unlink(missing_ok=True)
    return manifest


def _rename_unless_taken(partial: Path, path: Path) -> None:
    """Give the complete archive its name unless a file has it: a hard link fails rather
    than replace one (the partial name goes in `backup_write`'s finally). A file system
    without hard links (each says so its own way: EPERM, ENOTSUP, ENOSYS on a FUSE mount...)
    gets a check just before an ordinary rename, which raises what is really wrong."""
    try:
        os.link(partial, path)
    except FileExistsError:
        raise ArchiveExists(f"{path} exists already") from None
    except OSError:
        if os.path.lexists(path):
            raise ArchiveExists(f"{path} exists already") from None
        os.replace(partial, path)


def _project_ids(storage: Scope) -> set[int]:
    from roject.models import Project

    if storage == "none":
        return set()
    existing = set(Project.objects.values_list("pk", flat=True))
    if storage == "all":
        return existing
    unknown = sorted(set(storage) - existing)
    if unknown:
        raise BackupError(f"no project with id {', '.join(map(str, unknown))}")
    return set(storage)


def backup_stream(
    out: BinaryIO, *, storage: Scope = "all", compress: bool = False, using: str = DEFAULT_DB_ALIAS
) -> Manifest:
    """(Blocking) Write the archive to a stream (consistency.py says how it stays whole)."""
    connection = connections[using]
    models = backed_up_models()
    scope = storage if isinstance(storage, str) else "some"
    locks = ChangeLocks()
    try:
        while True:
            locks.hold(_project_ids(storage))
            with read_snapshot(connection):
                projects = _project_ids(storage)  # the snapshot's first read
                if not projects <= locks.held():  # a project made meanwhile: lock it too
                    continue
                header = header_make(connection, storage=scope, projects=sorted(projects))
                writer = ArchiveWriter(out, header=header, compress=compress)
                try:
                    return _contents_write(writer, projects, locks, models, connection, using)
                except BaseException:
                    writer.abandon()
                    raise
    finally:
        locks.release()


def _contents_write(
    writer: ArchiveWriter, projects: set[int], locks: ChangeLocks, models, connection, using: str
) -> Manifest:
    for project_id in sorted(projects):
        writer.project_seen(project_id)
        for entry, content in project_entries(project_id):
            writer.storage_add(project_id, entry, content)
    locks.release()  # the storage is copied; the rows come from the snapshot
    for model in models:
        _table_write(writer, model, connection, using)
    return writer.close()


def _table_write(writer: ArchiveWriter, model, connection, using: str) -> None:
    columns, encode = row_encoder(model)
    attnames = [field.attname for field in columns_of(model)]
    rows = (
        model._base_manager.using(using)
        .order_by("pk")
        .values_list(*attnames)
        .iterator(chunk_size=_CHUNK_ROWS)
    )
    label = model_label(model)
    writer.table_add(label, model._meta.db_table, columns, (encode(row) for row in rows))
    if has_sequence(model):
        writer.manifest.sequences[label] = sequence_read(model, connection)
