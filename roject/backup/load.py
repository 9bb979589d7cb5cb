"""`restore`: an archive put back into an empty installation, all of it or nothing.

The archive is read twice. The first read checks it whole (every digest against the
manifest, the Rojo and migrations that made it) and touches nothing; the apps' restore
checks (ROJO_RESTORE_CHECKS: no reply running on this installation's servers) are asked
then too. The second restores: the rows in one transaction, the storage into a staging
directory; the projects' storage is renamed into place just before the commit (and renamed
back if the commit fails), so a failure at any point leaves the installation as it was. The
second read checks the digests again, so an archive changed between the two reads fails the
same way.

After the rows: each table's id sequence goes on after the highest id the source handed
out; Django's post-migrate hooks run as after a `migrate` (content types and permissions
the archive lacks, the audit log's UPDATE trigger, SQLite's full-text triggers, which made
the search index as the rows went in; PostgreSQL computes its search vectors itself); then,
after the commit, the apps' restore hooks (ROJO_RESTORE_HOOKS: turns the backup caught
running are ended as interrupted; what a hook returns is a note the command prints, such as
secrets sealed with a key this installation lacks).
"""

import functools
import logging
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from django.apps import apps
from django.conf import settings
from django.contrib.contenttypes.models import ContentType
from django.core.management.sql import emit_post_migrate_signal
from django.db import DEFAULT_DB_ALIAS, connections, transaction
from django.utils.module_loading import import_string

from roject.identity.sessions import SessionNotEnded, sessions_cached_end
from roject.models import AuditAction, AuditEntry
from roject.storage import StorageError
from roject.storage.staging import StorageStaging, storage_holds_projects

from .errors import BackupError
from .interrupted import RESTORE_OBJECT, restore_marked, restores_settled
from .manifest import Manifest, newer_refusal, schema_refusal
from .nuls import holds_nul, nuls_line, nuls_refused
from .reading import archive_read
from .tables import (
    EXCLUDED,
    MADE_BY_MIGRATE,
    backed_up_models,
    has_sequence,
    insert_sql,
    model_label,
    row_decoder,
    sequence_set,
)

logger = logging.getLogger(__name__)
_BATCH_ROWS = 500
_BATCH_CHARACTERS = 8 << 20


@dataclass(frozen=True, kw_only=True)
class Checked:
    """What a check of an archive found: its manifest, and the values it holds with a NUL
    this database refuses, by model (nuls.py)."""

    manifest: Manifest
    nuls: Counter[str] = field(default_factory=Counter)
    # What the apps' hooks found that the operator must act on (a hook's returned words).
    notes: list[str] = field(default_factory=list)

    def summary(self) -> str:
        """The manifest's line, and what a restore here changes."""
        return "\n".join(filter(None, [self.manifest.summary(), nuls_line(self.nuls, done=False)]))


@dataclass(frozen=True, kw_only=True)
class Restored(Checked):
    """What a restore did: also the projects whose storage it left as it was (`--replace`
    with an archive that carries none for them)."""

    storage_kept: list[int] = field(default_factory=list)
    # The restore hooks that failed once it had committed: (hook, error).
    hooks_failed: list[tuple[str, str]] = field(default_factory=list)

    def summary(self) -> str:
        """The manifest's line, and what the restore left or changed."""
        lines = [self.manifest.summary(), nuls_line(self.nuls, done=True)]
        if self.storage_kept:
            count = len(self.storage_kept)
            lines.append(
                f"kept the storage of {count} project{'s' if count != 1 else ''} the archive "
                f"does not carry, as it was: {', '.join(map(str, self.storage_kept))}"
            )
        return "\n".join(filter(None, lines))


def backup_verify(*, path: Path, using: str = DEFAULT_DB_ALIAS) -> Checked:
    """(Blocking) Check an archive whole without restoring it: what it holds, with the
    apps' verify hooks' notes (ROJO_VERIFY_HOOKS: what a restore here could not open), or
    BackupError."""
    connection = connections[using]
    nuls: Counter[str] = Counter()
    count_nuls = nuls_refused(connection)
    hooks = [import_string(hook)() for hook in getattr(settings, "ROJO_VERIFY_HOOKS", ())]

    def header_check(header: dict) -> None:
        refusal = newer_refusal(header, connection)
        if refusal:
            raise BackupError(refusal)

    def rows_read(label: str, columns: list[str], rows: Iterator[list]) -> None:
        wanting = [hook for hook in hooks if hook.wants(label)]
        if not wanting and not count_nuls:
            return
        for row in rows:
            if count_nuls:
                nuls[label] += sum(map(holds_nul, row))
            if wanting:
                values = dict(zip(columns, row, strict=False))
                for hook in wanting:
                    hook.row(label, values)

    try:
        with Path(path).open("rb") as source:
            manifest = archive_read(source, on_header=header_check, on_rows=rows_read)
    except FileNotFoundError as exc:
        raise BackupError(f"no archive at {path}") from exc
    except IsADirectoryError as exc:
        raise BackupError(f"{path} is a directory; name the archive in it") from exc
    notes = [note for note in (hook.note() for hook in hooks) if note]
    return Checked(manifest=manifest, nuls=+nuls, notes=notes)


def backup_restore(*, path: Path, replace: bool = False, using: str = DEFAULT_DB_ALIAS) -> Restored:
    """(Blocking) Restore the archive at `path`; `replace`: delete what the installation
    holds first (else a non-empty one is refused), but the storage of the projects the
    archive carries none for and restores the rows of."""
    connection = connections[using]
    manifest = backup_verify(path=path, using=using).manifest
    refusal = schema_refusal(manifest.header, connection)
    if refusal:
        raise BackupError(refusal)
    ordered = backed_up_models()
    models = {model_label(model): model for model in ordered}
    unknown = sorted({table["model"] for table in manifest.tables} - models.keys())
    if unknown:
        raise BackupError(f"the archive holds tables this installation lacks: {unknown}")
    if not replace:
        _refuse_non_empty(ordered, using)
    for check in getattr(settings, "ROJO_RESTORE_CHECKS", ()):
        refusal = import_string(check)(using=using)
        if refusal:
            raise BackupError(refusal)
    try:  # their rows go below; a cached copy would outlive them
        sessions_cached_end(using=using)
    except SessionNotEnded as exc:
        raise BackupError(f"{exc}: the sessions there would outlive the restore") from exc
    try:  # a restore killed during its swap, finished or undone first
        restores_settled()
    except OSError as exc:
        raise BackupError(f"a restore killed earlier could not be settled: {exc}") from exc
    staging = StorageStaging()
    token = uuid.uuid4().hex
    try:
        try:
            with transaction.atomic(using=using):
                restore_marked(token=token, using=using)
                _tables_clear(ordered, connection)
                nuls: Counter[str] = Counter()
                insert = functools.partial(_rows_insert, models, connection, nuls)
                with Path(path).open("rb") as source:
                    # Checked again as it is read: the archive may have changed since.
                    try:
                        manifest = archive_read(
                            source, on_entry=staging.entry_place, on_rows=insert
                        )
                    except StorageError as exc:  # an entry the staging refused to write
                        raise BackupError(str(exc)) from exc
                for label, model in models.items():  # every table's, whatever the manifest names
                    if has_sequence(model):
                        sequence_set(model, connection, manifest.sequences.get(label, 0))
                ContentType.objects.clear_cache()  # its ids are the archive's now
                emit_post_migrate_signal(verbosity=0, interactive=False, db=using)
                _restore_recorded(token=token, path=path, replace=replace, using=using)
                kept = staging.swap_in(
                    replace_all=replace,
                    keep=_projects_restored(using) - manifest.project_ids(),
                    token=token,
                )
        except BaseException:
            staging.swap_back()  # what swap_in moved, if anything, back as it was
            raise
        staging.finish()  # before the journal goes: one killed meanwhile is finished later
    finally:
        staging.discard()
    ContentType.objects.clear_cache()
    failed, notes = [], []
    for hook in getattr(settings, "ROJO_RESTORE_HOOKS", ()):
        try:  # the restore is committed: a failure here is told, not taken for its refusal
            note = import_string(hook)()
        except Exception as exc:
            logger.exception("restore hook %s failed", hook)
            failed.append((hook, str(exc) or type(exc).__name__))
            continue
        if note:
            notes.append(str(note))
    return Restored(
        manifest=manifest, nuls=nuls, storage_kept=kept, hooks_failed=failed, notes=notes
    )


def _restore_recorded(*, token: str, path: Path, replace: bool, using: str) -> None:
    """The audit entry of the restore, among its rows: it commits with them, and tells a
    restore killed during its swap that the commit happened (roject.backup.interrupted)."""
    AuditEntry.objects.using(using).create(
        action=AuditAction.BACKUP_RESTORED,
        actor_kind=AuditEntry.ActorKind.SYSTEM,
        object_type=RESTORE_OBJECT,
        object_id=token,
        object_repr=Path(path).name[:200],
        details={"replace": replace, "command": "restore"},
    )


def _projects_restored(using: str) -> set[int]:
    from roject.models import Project

    return set(Project.objects.using(using).values_list("pk", flat=True))


def _refuse_non_empty(models, using: str) -> None:
    for model in models:
        label = model_label(model)
        if label not in MADE_BY_MIGRATE and model._base_manager.using(using).exists():
            raise BackupError(
                f"this installation is not empty (it holds {label} rows): restore into an "
                "empty one (a new database, migrated), or pass --replace to delete what "
                "it holds first"
            )
    if storage_holds_projects():
        raise BackupError(
            "this installation's storage holds projects' files: restore into an empty "
            "ROJO_STORAGE_DIR, or pass --replace to set them aside"
        )


def _tables_clear(models, connection) -> None:
    """Delete every row the archive replaces, dependants first (plain DELETEs: the
    constraints are checked at the commit), and the sessions: a session left from before
    would name a user id that is someone else's now (their cached copies went before)."""
    quote = connection.ops.quote_name
    left_out = [apps.get_model(label) for label in EXCLUDED if _installed(label)]
    with connection.cursor() as cursor:
        for model in [*left_out, *reversed(models)]:
            cursor.execute(f"DELETE FROM {quote(model._meta.db_table)}")


def _installed(label: str) -> bool:
    try:
        apps.get_model(label)
    except LookupError:
        return False
    return True


def _rows_insert(
    models: dict, connection, nuls: Counter[str], label: str, columns: list[str], rows
) -> None:
    model = models[label]
    decode = row_decoder(model, columns, connection, nuls)
    sql = insert_sql(model, columns, connection)
    batch: list[list] = []
    characters = 0
    with connection.cursor() as cursor:
        for row in rows:
            batch.append(decode(row))
            characters += sum(len(value) for value in row if isinstance(value, str))
            if len(batch) >= _BATCH_ROWS or characters >= _BATCH_CHARACTERS:
                cursor.executemany(sql, batch)
                batch, characters = [], 0
        if batch:
            cursor.executemany(sql, batch)
