"""The audit log read back: its filters, and its entries as CSV or JSON, streamed.

The admin (every entry) and a project's audit page (its owners, its entries) share these,
and both audit the export itself. The files are written a chunk of rows at a time in a
thread of their own (roject/server/streaming.py), so a log of any size goes out without being
held in memory.
"""

import csv
import io
import json
from collections.abc import Iterable, Iterator

from django.db import connections
from django.db.models import QuerySet
from django.http import StreamingHttpResponse
from django.utils import timezone

from roject.audit.csv_cells import csv_cell
from roject.audit.log import AuditAction, AuditActor, audit_record
from roject.models import AuditEntry
from roject.server.streaming import blocking_stream

EXPORT_FORMATS = ("csv", "json")
COLUMNS = [
    "id",
    "at",
    "action",
    "actor_kind",
    "actor_name",
    "actor_user_id",
    "actor_token_id",
    "project_id",
    "project_name",
    "object_type",
    "object_id",
    "object_repr",
    "details",
    "address",
]
_CHUNK = 1000


def audit_entry_list(
    *, project_id: int | None = None, action: str = "", actor: str = ""
) -> QuerySet[AuditEntry]:
    """Entries newest first; of one project, one action, and actors whose name holds
    `actor`, when given (an unknown action matches nothing)."""
    entries = AuditEntry.objects.all()
    if project_id is not None:
        entries = entries.filter(project_id=project_id)
    if action:
        entries = entries.filter(action=action if action in AuditAction.values else "")
    if actor:
        entries = entries.filter(actor_name__icontains=actor[:200])
    return entries


def _row(entry: AuditEntry) -> dict:
    row = {column: getattr(entry, column) for column in COLUMNS}
    row["at"] = entry.at.isoformat()
    return row


def _csv_lines(entries: QuerySet[AuditEntry]) -> Iterator[str]:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=COLUMNS)
    writer.writeheader()
    for number, entry in enumerate(entries.iterator(chunk_size=_CHUNK), 1):
        row = _row(entry)
        row["details"] = json.dumps(entry.details, ensure_ascii=False, sort_keys=True)
        writer.writerow({column: csv_cell(value) for column, value in row.items()})
        if number % 100 == 0:
            yield _drained(buffer)
    yield _drained(buffer)


def _drained(buffer: io.StringIO) -> str:
    text = buffer.getvalue()
    buffer.seek(0)
    buffer.truncate()
    return text


def _json_lines(entries: QuerySet[AuditEntry]) -> Iterable[str]:
    yield "["
    for number, entry in enumerate(entries.iterator(chunk_size=_CHUNK)):
        yield ("," if number else "") + "\n" + json.dumps(_row(entry), ensure_ascii=False)
    yield "\n]\n"


def audit_export_response(
    *,
    entries: QuerySet[AuditEntry],
    fmt: str,
    actor: AuditActor,
    project=None,
    filters: dict,
) -> StreamingHttpResponse:
    """The entries as a streamed CSV or JSON download (`fmt` one of EXPORT_FORMATS); the
    export is itself audited, with the filters it applied."""
    audit_record(
        action=AuditAction.EXPORT,
        actor=actor,
        project=project,
        object_type="audit log",
        object_repr="audit log",
        details={"format": fmt, "filters": {k: str(v)[:100] for k, v in filters.items()}},
    )
    lines = _csv_lines if fmt == "csv" else _json_lines
    content_type = "text/csv; charset=utf-8" if fmt == "csv" else "application/json"

    def produce(emit) -> None:
        """(In the stream's own thread) Read the entries a chunk at a time and hand them on."""
        try:
            for text in lines(entries):
                emit(text.encode())
        finally:
            connections.close_all()  # this thread's own: it ends with the download

    response = StreamingHttpResponse(blocking_stream(produce), content_type=content_type)
    stamp = timezone.now().strftime("%Y%m%d-%H%M%S")
    response["Content-Disposition"] = f'attachment; filename="audit-{stamp}.{fmt}"'
    response["Cache-Control"] = "no-store"
    return response
