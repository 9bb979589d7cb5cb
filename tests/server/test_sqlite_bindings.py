"""On SQLite, a long value written is not kept by the connection's prepared statements."""

import _sqlite3
import ctypes

import pytest
from django.contrib.auth.models import User
from django.db import connection

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's prepared statements"),
]

LONG = "word " * 200_000  # 1 MB
_used = ctypes.CDLL(_sqlite3.__file__).sqlite3_memory_used
_used.restype = ctypes.c_int64


def _bound_copy(write) -> int:
    """How much of SQLite's heap a long value's write holds until the same statement runs
    again with a short one (its pages stay cached either way)."""
    write(LONG)
    held = _used()
    write("short")
    return held - _used()


def test_an_update_of_a_long_value_leaves_no_copy_bound():
    user = User.objects.create(username="u")
    held = _bound_copy(lambda value: User.objects.filter(pk=user.pk).update(last_name=value))
    assert held < 100_000
    User.objects.filter(pk=user.pk).update(last_name=LONG)
    assert User.objects.get(pk=user.pk).last_name == LONG


def test_an_insert_returning_its_id_leaves_no_copy_bound():
    held = _bound_copy(lambda value: User.objects.create(username=value[:9], last_name=value))
    assert held < 100_000
    User.objects.create(username="v", last_name=LONG)
    assert User.objects.get(username="v").last_name == LONG


def test_a_statement_cleared_runs_again_with_its_new_values():
    user = User.objects.create(username="w")
    for value in (LONG, "short", LONG + "!"):
        User.objects.filter(pk=user.pk).update(last_name=value)
        assert User.objects.get(pk=user.pk).last_name == value


def test_a_query_still_reading_its_rows_is_left_as_it_is():
    User.objects.bulk_create([User(username=f"r{n}") for n in range(300)])
    with connection.cursor() as reading:
        reading.execute("SELECT username FROM auth_user WHERE username LIKE %s", ["r%"])
        first = reading.fetchmany(10)
        User.objects.create(username="long", last_name=LONG)  # the same connection
        rest = reading.fetchall()
    assert sorted(u for (u,) in first + rest) == sorted(f"r{n}" for n in range(300))
