"""Hot reads whose queryset Django builds and compiles once, then runs with each call's values.

For a small query, building it (filter, annotate: each lookup resolved) and compiling it
(as_sql: every column named and quoted, every expression turned into SQL) cost Django about
ten times what the database takes to answer it: the rojo a chat message names, 602 µs
through the ORM against 57 µs prepared (docs/performance.md, section 10). A read made for
every chat message is written once as a queryset over markers; its SQL is compiled at its
first run on each database, and each run binds the call's values, reads the rows and builds
what the ORM's own iterables build (the fields' converters, select_related objects,
annotations). Every turn's end writes the same way: `update` and `delete` run the statement
QuerySet.update and QuerySet.delete would (with the reply's and its usage's inserts
prepared too, a turn's start and end went from 22.5 M to 21.0 M instructions: section 10).

What cannot be checked is refused at that first run (ValueError), not run differently:
each marker must come out as a bound parameter of its own, unchanged (a lookup that rewrites
its value, `icontains` say, would not), two builds must compile alike (a value computed in
the build, a time, would be frozen into every later run), and the queryset yields model
instances without prefetches, or one flat column.
"""

import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import connections, transaction
from django.db.models import QuerySet, sql
from django.db.models.deletion import Collector
from django.db.models.query import FlatValuesListIterable, ModelIterable, get_related_populators

from roject.server.prepared_inserts import bound_alike

__all__ = ["PreparedQuery"]

# Plus its argument's index: within 32 bits, and positive, as a negative value on a positive
# field (a message's position, say) is out of its range, which Django compiles away.
_INT_MARKER = 1_734_620_155
_UUID_MARKER = 0x70726570_61726564 << 64  # "prepared", plus its argument's index


def _marker(kind: type, index: int):
    if kind is str:
        return f"\x00prepared-{index}\x00"
    if kind is int:
        return _INT_MARKER + index
    if kind is uuid.UUID:
        return uuid.UUID(int=_UUID_MARKER + index)
    raise TypeError(f"a prepared query's arguments are str, int or UUID, not {kind.__name__}")


@dataclass(frozen=True)
class _Write:
    """An UPDATE's or DELETE's statement: the values set (their fields, in order), then the
    selection's parameters."""

    sql: str
    params: tuple
    slots: tuple[tuple[int, int, Callable | None], ...]
    fields: tuple = ()
    model: type | None = None


@dataclass(frozen=True)
class _Compiled:
    sql: str
    params: tuple
    # (position among the parameters, argument index, what the argument is bound as, if not
    # itself: a UUID's hex where the database has no type for it; psycopg's Int4 where
    # Django's PostgreSQL backend names an integer's type)
    slots: tuple[tuple[int, int, Callable | None], ...]
    compiler: Any  # its converters need it (they read its connection's settings)
    converters: dict
    columns: int | None  # the select's width when the SQL returns more columns
    model: type | None  # None: one flat column
    fields: slice | None = None
    names: tuple[str, ...] = ()
    populators: tuple = ()
    annotations: tuple[tuple[str, int], ...] = ()


class PreparedQuery:
    """A read built by `build(*markers)`, one marker per type in `kinds` (str or int)."""

    def __init__(self, build: Callable[..., QuerySet], *kinds: type) -> None:
        self._build = build
        self._kinds = kinds
        self._compiled: dict[str, _Compiled] = {}
        self._writes: dict[tuple, _Write] = {}
        self._lock = threading.Lock()

    def first(self, *args, using: str = "default"):
        """(Blocking) The first row's model (or value), None for no row."""
        rows = self.all(*args, using=using)
        return rows[0] if rows else None

    def all(self, *args, using: str = "default") -> list:
        """(Blocking) Every row's model (or value), in one query."""
        self._check(args)
        compiled = self._compiled.get(using) or self._compile(using)
        params = _bound(compiled.params, compiled.slots, args)
        with connections[using].cursor() as cursor:
            cursor.execute(compiled.sql, params)
            rows = cursor.fetchall()
        if compiled.columns is not None:
            rows = [row[: compiled.columns] for row in rows]
        if compiled.converters:
            rows = compiled.compiler.apply_converters(rows, compiled.converters)
        if compiled.model is None:
            return [row[0] for row in rows]
        return [self._instance(compiled, row, using) for row in rows]

    def update(self, *args, using: str = "default", **values) -> int:
        """(Blocking) Set `values` on the rows selected, as QuerySet.update sets them: the
        number of rows. A value that is an expression or a model goes through the ORM."""
        self._check(args)
        if any(_not_plain(value) for value in values.values()):
            return self._build(*args).using(using).update(**values)
        shape = ("update", using, *((name, value is None) for name, value in values.items()))
        write = self._writes.get(shape) or self._write_compile(
            shape, lambda query, markers: _update_statement(query, markers, using, values)
        )
        connection = connections[using]
        params = _bound(write.params, write.slots, args)
        for position, (name, field) in enumerate(write.fields):
            params[position] = field.get_db_prep_save(values[name], connection=connection)
        with transaction.mark_for_rollback_on_error(using), connection.cursor() as cursor:
            cursor.execute(write.sql, params)
            return cursor.rowcount

    def delete(self, *args, using: str = "default") -> int:
        """(Blocking) Delete the rows selected, as QuerySet.delete deletes a model that
        nothing cascades to and no signal watches (else through it): the number of rows."""
        self._check(args)
        shape = ("delete", using)
        write = self._writes.get(shape) or self._write_compile(
            shape, lambda query, markers: _delete_statement(query, markers, using)
        )
        if not Collector(using=using).can_fast_delete(write.model):  # receivers may come later
            return self._build(*args).using(using).delete()[0]
        params = _bound(write.params, write.slots, args)
        with transaction.mark_for_rollback_on_error(using), connections[using].cursor() as cursor:
            cursor.execute(write.sql, params)
            return cursor.rowcount

    def _check(self, args: tuple) -> None:
        if len(args) != len(self._kinds) or not all(
            isinstance(arg, kind) and not isinstance(arg, bool)
            for arg, kind in zip(args, self._kinds, strict=True)
        ):
            raise TypeError(f"a prepared query takes {[k.__name__ for k in self._kinds]}")

    def _write_compile(self, shape: tuple, statement: Callable) -> _Write:
        """The write `statement(query, markers)` compiles for the selection, once a shape."""
        with self._lock:
            if shape not in self._writes:
                markers = [_marker(kind, index) for index, kind in enumerate(self._kinds)]
                queryset = self._build(*markers)
                query = queryset.query
                if query.is_sliced or query.combinator or query.distinct_fields or queryset._fields:
                    raise ValueError(
                        "a sliced, combined, distinct or values() selection is not prepared"
                    )
                self._writes[shape] = statement(query, markers)
            return self._writes[shape]

    @staticmethod
    def _instance(compiled: _Compiled, row, using: str):
        """What ModelIterable makes of a row."""
        made = compiled.model.from_db(using, compiled.names, row[compiled.fields])
        for populator in compiled.populators:
            populator.populate(row, made)
        for name, position in compiled.annotations:
            setattr(made, name, row[position])
        return made

    def _compile(self, using: str) -> _Compiled:
        with self._lock:
            if using in self._compiled:
                return self._compiled[using]
            markers = [_marker(kind, index) for index, kind in enumerate(self._kinds)]
            queryset = self._build(*markers)
            iterable = queryset._iterable_class
            if iterable not in (ModelIterable, FlatValuesListIterable):
                raise ValueError("only model instances or one flat column are prepared")
            if queryset._prefetch_related_lookups or queryset._known_related_objects:
                raise ValueError("a prepared query cannot prefetch")
            compiler = queryset.query.get_compiler(using=using)
            sql, params = compiler.as_sql()
            again = self._build(*markers).query.get_compiler(using=using).as_sql()
            if again != (sql, params):
                raise ValueError("two builds differ: a value computed in it would be frozen")
            slots = tuple(_slots(params, markers))
            select = compiler.select
            columns = compiler.col_count
            compiled = {
                "sql": sql,
                "params": tuple(params),
                "slots": slots,
                "compiler": compiler,
                "converters": compiler.get_converters([s[0] for s in select[:columns]]),
                "columns": columns if compiler.has_extra_select else None,
                "model": None,
            }
            if iterable is ModelIterable:
                info = compiler.klass_info
                first, last = info["select_fields"][0], info["select_fields"][-1] + 1
                compiled |= {
                    "model": info["model"],
                    "fields": slice(first, last),
                    "names": tuple(s[0].target.attname for s in select[first:last]),
                    "populators": tuple(get_related_populators(info, select, using)),
                    "annotations": tuple(compiler.annotation_col_map.items()),
                }
            self._compiled[using] = made = _Compiled(**compiled)
            return made


def _hex(value: uuid.UUID) -> str:
    return value.hex


def _bound(params: tuple, slots: tuple, args: tuple) -> list:
    """The compiled parameters with each call's arguments in their slots."""
    bound = list(params)
    for position, index, bound_as in slots:
        bound[position] = args[index] if bound_as is None else bound_as(args[index])
    return bound


def _not_plain(value) -> bool:
    """A value Django's update would turn into SQL or a key rather than bind as it is."""
    return hasattr(value, "resolve_expression") or hasattr(value, "prepare_database_save")


def _update_statement(query, markers: list, using: str, values: dict) -> _Write:
    """The UPDATE QuerySet.update compiles, checked against the values bound here."""
    query = query.chain(sql.UpdateQuery)
    query.add_update_values(values)
    query.clear_select_clause()
    if query.related_updates or query.order_by:
        raise ValueError("an update of several tables or in order is not prepared")
    statement, params = query.get_compiler(using=using).as_sql()
    if query.count_active_tables() != 1:
        raise ValueError("an update through a join is not prepared")
    connection = connections[using]
    fields = tuple(
        (name, field)
        for name, (field, _, value) in zip(values, query.values, strict=True)
        if value is not None
    )
    if any(hasattr(field, "get_placeholder") for _, field in fields):
        raise ValueError("a field with a placeholder of its own is not prepared")
    ours = [field.get_db_prep_save(values[name], connection=connection) for name, field in fields]
    if len(params) < len(ours) or not all(map(bound_alike, params, ours)):
        raise ValueError("the update binds other values")
    slots = tuple((len(fields) + at, index, bound_as)
                  for at, index, bound_as in _slots(params[len(fields) :], markers))  # fmt: skip
    return _Write(statement, tuple(params), slots, fields)


def _delete_statement(query, markers: list, using: str) -> _Write:
    """The DELETE QuerySet._raw_delete compiles (what QuerySet.delete runs for a model that
    nothing cascades to and no signal watches)."""
    query = query.clone()
    query.__class__ = sql.DeleteQuery
    statement, params = query.get_compiler(using=using).as_sql()
    return _Write(statement, tuple(params), tuple(_slots(params, markers)), model=query.model)


def _slots(params, markers) -> list[tuple[int, int, Callable | None]]:
    """Where each marker went among the compiled parameters, and what its argument is bound
    as (_Compiled.slots); ValueError for a marker changed or missing."""
    slots, found = [], set()
    for position, value in enumerate(params):
        for index, marker in enumerate(markers):
            if type(value) is type(marker) and value == marker:
                slots.append((position, index, None))
                found.add(index)
            elif isinstance(marker, uuid.UUID) and value == marker.hex:
                slots.append((position, index, _hex))
                found.add(index)
            elif type(marker) is int and isinstance(value, int) and value == marker:
                slots.append((position, index, type(value)))  # an int's subclass: Int4
                found.add(index)
            elif isinstance(value, str) and isinstance(marker, str) and marker in value:
                raise ValueError(f"argument {index} was rewritten by its lookup: {value!r}")
    if found != set(range(len(markers))):
        raise ValueError("an argument did not come out as a parameter of its own")
    return slots
