"""Hot inserts whose INSERT statement Django compiles once, then runs with each row's values.

`Model.objects.create` builds an InsertQuery and compiles it for every row: the table and
every column named and quoted, the placeholders assembled, the RETURNING clause added. For
the rows every chat message stores (the conversation, the user's message, the turn's
record) that compiling is about a third of the insert's CPU. Here the statement is compiled
by Django's own compiler at the first row on each database, and each later row binds the
values Django would bind: each field's `pre_save` (auto_now and the like) and
`get_db_prep_save`, in the compiler's order, read back as Django reads them (RETURNING or
the last insert id, through the fields' converters).

At that first row the values computed here must equal the parameters Django compiled, else
the model is refused (ValueError), not inserted differently. A row Django would insert
differently goes through `save()` instead: a model with pre_save or post_save receivers
(they would not be sent), a value that is an expression (a field's db_default, F()), a
primary key already set, a proxy or a model with parents.
"""

import threading
from dataclasses import dataclass
from typing import Any

from django.db import connections, transaction
from django.db.models import Model, signals
from django.db.models.sql import InsertQuery

__all__ = ["PreparedInsert", "bound_alike", "prepared_insert"]


@dataclass(frozen=True)
class _Compiled:
    sql: str
    fields: tuple  # the inserted fields, in the statement's order
    returning: tuple  # the fields read back (the primary key)
    compiler: Any  # how Django reads them back: RETURNING's parameters, the converters
    converters: dict


class PreparedInsert:
    """`create(**fields)` for one model: its INSERT compiled once per database."""

    def __init__(self, model: type[Model]) -> None:
        self._model = model
        self._compiled: dict[str, _Compiled] = {}
        self._lock = threading.Lock()

    def create(self, *, using: str = "default", **fields) -> Model:
        """(Blocking) The new row's model, stored as `Model.objects.create` stores it."""
        return self.insert(self._model(**fields), using=using)

    def insert(self, made: Model, *, using: str = "default") -> Model:
        """(Blocking) Store `made`, a new row of the model, as `made.save(force_insert=True)`
        stores it; `made`."""
        if type(made) is not self._model:
            raise TypeError(f"a prepared insert of {self._model.__name__} stores no other model")
        meta = self._model._meta
        if (
            made.pk is not None
            or meta.parents
            or meta.proxy
            or signals.pre_save.has_listeners(self._model)
            or signals.post_save.has_listeners(self._model)
        ):
            made.save(force_insert=True, using=using)
            return made
        made._prepare_related_fields_for_save(operation_name="save")
        connection = connections[using]
        compiled = self._compiled.get(using) or self._compile(made, using)
        raw = [field.pre_save(made, True) for field in compiled.fields]
        if any(hasattr(value, "resolve_expression") for value in raw):
            made.save(force_insert=True, using=using)
            return made
        params = [
            field.get_db_prep_save(value, connection=connection)
            for field, value in zip(compiled.fields, raw, strict=True)
        ]
        with transaction.mark_for_rollback_on_error(using), connection.cursor() as cursor:
            cursor.execute(compiled.sql, params)
            row = _returned(compiled, connection, cursor)
        if compiled.converters:
            row = next(iter(compiled.compiler.apply_converters([row], compiled.converters)))
        for value, field in zip(row, compiled.returning, strict=True):
            setattr(made, field.attname, value)
        made._state.db = using
        made._state.adding = False
        return made

    def _compile(self, made: Model, using: str) -> _Compiled:
        """The statement Django compiles for `made`, checked against the values bound here."""
        with self._lock:
            if using in self._compiled:
                return self._compiled[using]
            meta = self._model._meta
            fields = tuple(
                f
                for f in meta.local_concrete_fields
                if not f.generated and f is not meta.auto_field
            )
            returning = tuple(meta.db_returning_fields)
            query = InsertQuery(self._model)
            query.insert_values(fields, [made])
            compiler = query.get_compiler(using=using)
            compiler.returning_fields = returning
            [(sql, django_params)] = compiler.as_sql()
            connection = connections[using]
            # What pre_save gave Django (a time, say) is on `made` now: bound as create() binds.
            ours = [
                f.get_db_prep_save(getattr(made, f.attname), connection=connection) for f in fields
            ]
            if sql.count("%s") != len(ours) or not all(
                bound_alike(theirs, mine) for theirs, mine in zip(django_params, ours, strict=True)
            ):
                raise ValueError(f"{self._model.__name__}'s insert binds other values")
            if not (connection.features.can_return_columns_from_insert or _auto_only(returning)):
                raise ValueError(f"{self._model.__name__}'s new key cannot be read back")
            columns = [f.get_col(meta.db_table) for f in returning]
            converters = compiler.get_converters(columns)
            self._compiled[using] = made_once = _Compiled(
                sql, fields, returning, compiler, converters
            )
            return made_once


def bound_alike(theirs, mine) -> bool:
    """Whether two bound values are the same: of one type, equal, or alike in their repr
    (psycopg's adapters, Jsonb say, compare by identity)."""
    return type(theirs) is type(mine) and (theirs == mine or repr(theirs) == repr(mine))


def _auto_only(returning: tuple) -> bool:
    from django.db.models import AutoField

    return len(returning) == 1 and isinstance(returning[0], AutoField)


def _returned(compiled: _Compiled, connection, cursor) -> tuple:
    """The row's returned columns, read as SQLInsertCompiler.execute_sql reads them."""
    if connection.features.can_return_columns_from_insert:
        return tuple(
            connection.ops.fetch_returned_insert_columns(cursor, compiled.compiler.returning_params)
        )
    field = compiled.returning[0]
    return (connection.ops.last_insert_id(cursor, compiled.compiler.query.get_meta().db_table,
                                          field.column),)  # fmt: skip


_by_model: dict[type[Model], PreparedInsert] = {}


def prepared_insert(made: Model, *, using: str = "default") -> Model:
    """(Blocking) Store `made`, a new row of any model, by its model's PreparedInsert (made
    at its first row): for a row whose model the caller does not know (a call's change
    record, stored with the call's result)."""
    insert = _by_model.get(type(made))
    if insert is None:
        insert = _by_model.setdefault(type(made), PreparedInsert(type(made)))
    return insert.insert(made, using=using)
