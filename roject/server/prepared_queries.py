"""Hot reads whose queryset Django builds and compiles once, then runs with each call's values.

For a small query, building it (filter, annotate: each lookup resolved) and compiling it
(as_sql: every column named and quoted, every expression turned into SQL) cost Django about
ten times what the database takes to answer it: the rojo a chat message names, 602 µs
through the ORM against 57 µs prepared (docs/performance.md, section 10). A read made for
every chat message is written once as a queryset over markers; its SQL is compiled at its
first run on each database, and each run binds the call's values, reads the rows and builds
what the ORM's own iterables build (the fields' converters, select_related objects,
annotations).

What cannot be checked is refused at that first run (ValueError), not run differently:
each marker must come out as a bound parameter of its own, unchanged (a lookup that rewrites
its value, `icontains` say, would not), two builds must compile alike (a value computed in
the build, a time, would be frozen into every later run), and the queryset yields model
instances without prefetches, or one flat column.
"""

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import connections
from django.db.models import QuerySet
from django.db.models.query import FlatValuesListIterable, ModelIterable, get_related_populators

__all__ = ["PreparedQuery"]

_INT_MARKER = -1_734_620_155  # less its argument's index: no id is negative; within 32 bits


def _marker(kind: type, index: int):
    if kind is str:
        return f"\x00prepared-{index}\x00"
    if kind is int:
        return _INT_MARKER - index
    raise TypeError(f"a prepared query's arguments are str or int, not {kind.__name__}")


@dataclass(frozen=True)
class _Compiled:
    sql: str
    params: tuple
    slots: tuple[tuple[int, int], ...]  # (position among the parameters, argument index)
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
        self._lock = threading.Lock()

    def first(self, *args, using: str = "default"):
        """(Blocking) The first row's model (or value), None for no row."""
        rows = self.all(*args, using=using)
        return rows[0] if rows else None

    def all(self, *args, using: str = "default") -> list:
        """(Blocking) Every row's model (or value), in one query."""
        if len(args) != len(self._kinds) or not all(
            isinstance(arg, kind) and not isinstance(arg, bool)
            for arg, kind in zip(args, self._kinds, strict=True)
        ):
            raise TypeError(f"a prepared query takes {[k.__name__ for k in self._kinds]}")
        compiled = self._compiled.get(using) or self._compile(using)
        params = list(compiled.params)
        for position, index in compiled.slots:
            params[position] = args[index]
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


def _slots(params, markers) -> list[tuple[int, int]]:
    """Where each marker went among the compiled parameters; ValueError for a marker
    changed or missing."""
    slots, found = [], set()
    for position, value in enumerate(params):
        for index, marker in enumerate(markers):
            if type(value) is type(marker) and value == marker:
                slots.append((position, index))
                found.add(index)
            elif isinstance(value, str) and isinstance(marker, str) and marker in value:
                raise ValueError(f"argument {index} was rewritten by its lookup: {value!r}")
    if found != set(range(len(markers))):
        raise ValueError("an argument did not come out as a parameter of its own")
    return slots
