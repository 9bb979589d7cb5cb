"""The database as portable rows: which tables, in which order, each value exact.

Every concrete model of the installed apps is backed up (the project's and the Django ones
they need: users, groups, permissions, content types, the admin's log, the many-to-many
tables), but the sessions: a session is a login, tied to the SECRET_KEY that signed it, and
an archive holding live ones would be a credential; people log in again after a restore.

Values are written as JSON by their field's type, with nothing cut: a timestamp with its
microseconds (Django's own serializers keep milliseconds), bytes as base64, decimals and
UUIDs as strings, JSON fields as the JSON they hold. Rows are read back into the same
fields and inserted with plain INSERTs of the columns: no `save()`, so no `auto_now` moves
a time, no signal writes an audit entry, and the ids are the archive's.
The one change: on PostgreSQL, which refuses it, a NUL in text or JSON becomes U+FFFD
(nuls.py).
"""

import base64
import datetime
import decimal
import uuid
from collections import Counter
from collections.abc import Callable
from typing import Any

from django.apps import apps
from django.db import models
from django.db.backends.base.base import BaseDatabaseWrapper

from .errors import BackupError
from .nuls import holds_nul, nuls_refused, nuls_replaced

# Models never backed up ("app_label.model_name"): see the module's docstring.
EXCLUDED = {"sessions.session"}
# Models whose rows `migrate` makes in every installation: a restore replaces them with the
# archive's (their ids are referenced), and an installation holding only these is empty.
MADE_BY_MIGRATE = {"contenttypes.contenttype", "auth.permission"}


def model_label(model: type[models.Model]) -> str:
    return model._meta.label_lower


def backed_up_models() -> list[type[models.Model]]:
    """Every model whose rows a backup holds, each after the models it refers to (a cycle,
    which deferred constraints allow, is broken in name order)."""
    found = {
        model_label(model): model
        for model in apps.get_models(include_auto_created=True)
        if model._meta.managed
        and not model._meta.proxy
        and not model._meta.swapped
        and model_label(model) not in EXCLUDED
    }
    needs = {
        label: {
            model_label(field.related_model)
            for field in model._meta.concrete_fields
            if field.is_relation and field.related_model is not None
        }
        & (found.keys() - {label})
        for label, model in found.items()
    }
    ordered: list[type[models.Model]] = []
    done: set[str] = set()
    while len(done) < len(found):
        ready = sorted(label for label in found.keys() - done if needs[label] <= done)
        if not ready:  # a cycle: take the first in name order
            ready = [min(found.keys() - done)]
        for label in ready:
            ordered.append(found[label])
            done.add(label)
    return ordered


def _kind(field: models.Field) -> str:
    """The internal type of the value a column holds (a foreign key's is its target's)."""
    while field.is_relation:
        field = field.target_field
    return field.get_internal_type()


Encode = Callable[[Any], Any]
_ENCODERS: dict[str, Encode] = {
    "DateTimeField": lambda v: v.isoformat(),
    "DateField": lambda v: v.isoformat(),
    "TimeField": lambda v: v.isoformat(),
    "DurationField": lambda v: v // datetime.timedelta(microseconds=1),
    "BinaryField": lambda v: base64.b64encode(bytes(v)).decode("ascii"),
    "DecimalField": str,
    "UUIDField": str,
}
_DECODERS: dict[str, Encode] = {
    "DateTimeField": datetime.datetime.fromisoformat,
    "DateField": datetime.date.fromisoformat,
    "TimeField": datetime.time.fromisoformat,
    "DurationField": lambda v: datetime.timedelta(microseconds=v),
    "BinaryField": base64.b64decode,
    "DecimalField": decimal.Decimal,
    "UUIDField": uuid.UUID,
}


def columns_of(model: type[models.Model]) -> list[models.Field]:
    """The model's own columns (generated ones, like PostgreSQL's search vectors, are no
    fields: the database makes them again from the rows)."""
    return [field for field in model._meta.concrete_fields if field.column]


def row_encoder(model: type[models.Model]) -> tuple[list[str], Callable[[tuple], list]]:
    """The model's column names, and a function from a row of its attribute values (in
    that order) to JSON-ready values."""
    fields = columns_of(model)
    encoders = [_ENCODERS.get(_kind(field)) for field in fields]

    def encode(row: tuple) -> list:
        return [
            value if value is None or encoder is None else encoder(value)
            for value, encoder in zip(row, encoders, strict=True)
        ]

    return [field.column for field in fields], encode


def row_decoder(
    model: type[models.Model],
    columns: list[str],
    connection: BaseDatabaseWrapper,
    nuls: Counter[str] | None = None,
) -> Callable[[list], list]:
    """A function from an archived row (values of `columns`) to the values an INSERT of
    those columns binds on this database; BackupError when a column is not the model's.
    Where the database refuses NUL in text (nuls.py), a text or JSON value holding one has
    each made U+FFFD, and is counted in `nuls` under the model's label."""
    by_column = {field.column: field for field in columns_of(model)}
    unknown = [column for column in columns if column not in by_column]
    if unknown or len(set(columns)) != len(columns):
        raise BackupError(
            f"the archive's {model_label(model)} has columns this schema lacks: {unknown}"
        )
    fields = [by_column[column] for column in columns]
    decoders = [_DECODERS.get(_kind(field)) for field in fields]
    json_null = [isinstance(field, models.JSONField) and not field.null for field in fields]
    label, replace = model_label(model), nuls_refused(connection)

    def decode(row: list) -> list:
        if len(row) != len(fields):
            raise BackupError(f"a row of {label} has {len(row)} values")
        values = []
        for value, field, decoder, null in zip(row, fields, decoders, json_null, strict=True):
            if value is None and null:  # JSON's null in a column that holds no SQL NULL
                values.append(connection.ops.adapt_json_value(None, field.encoder))
                continue
            if value is not None and decoder is not None:
                value = decoder(value)
            elif replace and holds_nul(value):  # text or JSON (others have a decoder)
                value = nuls_replaced(value)
                if nuls is not None:
                    nuls[label] += 1
            values.append(field.get_db_prep_save(value, connection))
        return values

    return decode


def insert_sql(model: type[models.Model], columns: list[str], connection) -> str:
    quote = connection.ops.quote_name
    names = ", ".join(quote(column) for column in columns)
    marks = ", ".join(["%s"] * len(columns))
    return f"INSERT INTO {quote(model._meta.db_table)} ({names}) VALUES ({marks})"


def has_sequence(model: type[models.Model]) -> bool:
    """Whether the database hands out the model's ids (an auto-incrementing primary key)."""
    return isinstance(
        model._meta.pk, models.AutoField | models.BigAutoField | models.SmallAutoField
    )


def sequence_read(model: type[models.Model], connection: BaseDatabaseWrapper) -> int:
    """The highest id the database has handed out for the model (0: none), deleted rows'
    included: a restore goes on after it, so no id of a hard-deleted row is given again
    (the audit log and the change records name rows by id)."""
    table, column = model._meta.db_table, model._meta.pk.column
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT pg_get_serial_sequence(%s, %s)", [table, column])
            (sequence,) = cursor.fetchone()
            if not sequence:
                return 0
            cursor.execute(f"SELECT last_value, is_called FROM {sequence}")
            last, called = cursor.fetchone()
            return int(last) if called else 0
        if connection.vendor == "sqlite":
            cursor.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'sqlite_sequence'"
            )
            if cursor.fetchone() is None:
                return 0
            cursor.execute("SELECT seq FROM sqlite_sequence WHERE name = %s", [table])
            found = cursor.fetchone()
            return int(found[0]) if found else 0
    return 0


def sequence_set(model: type[models.Model], connection: BaseDatabaseWrapper, high: int) -> None:
    """Make the database hand out ids after `high` and after every id in the table."""
    quote = connection.ops.quote_name
    table, column = model._meta.db_table, model._meta.pk.column
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT MAX({quote(column)}) FROM {quote(table)}")
        highest = max(int(cursor.fetchone()[0] or 0), int(high))
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT setval(pg_get_serial_sequence(%s, %s), %s, %s)",
                [table, column, max(highest, 1), highest > 0],
            )
        elif connection.vendor == "sqlite" and highest > 0:
            cursor.execute("UPDATE sqlite_sequence SET seq = %s WHERE name = %s", [highest, table])
            if cursor.rowcount == 0:
                cursor.execute(
                    "INSERT INTO sqlite_sequence (name, seq) VALUES (%s, %s)", [table, highest]
                )
