"""Letting go of a long value SQLite's prepared statements would otherwise keep.

Python's sqlite3 keeps each connection's statements prepared (its statement cache), and a
prepared statement keeps the values last bound to it: sqlite3_reset does not clear them. So
a connection that wrote a long reply holds a copy of it in SQLite's heap for as long as that
statement stays cached, and the database threads keep their connections for the life of the
process (docs/performance.md, section 8: about 12 MiB with ten 0.8 MB replies). After a write
that bound a long value, clear_bindings() clears the bindings of the connection's statements
that are not running: Python binds every parameter again before each run, so a cleared
binding is never read. A query of short values pays only the look at its parameters (about
2 µs for six, on this shared machine); the clearing itself about 1.4 µs a cached statement.

Python does not hand out the connection's sqlite3 handle; it is the first field of CPython's
connection object (Modules/_sqlite/connection.h, 3.11 to 3.13). Elsewhere this does nothing.
"""

import ctypes
import sys

LONG = 64 * 1024  # a bound value at least this long (characters or bytes) is let go of

_HANDLE_OFFSET = object.__basicsize__  # after PyObject_HEAD
_KNOWN = sys.implementation.name == "cpython" and (3, 11) <= sys.version_info[:2] <= (3, 13)


def _library():
    import _sqlite3

    lib = ctypes.CDLL(_sqlite3.__file__)  # the SQLite the module itself is linked to
    lib.sqlite3_next_stmt.restype = ctypes.c_void_p
    lib.sqlite3_next_stmt.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    lib.sqlite3_stmt_busy.argtypes = [ctypes.c_void_p]
    lib.sqlite3_clear_bindings.argtypes = [ctypes.c_void_p]
    return lib


_lib = _library() if _KNOWN else None


def long_value(params) -> bool:
    """Whether any of the parameters is a text or blob of LONG or more."""
    if not params or _lib is None:
        return False
    values = params.values() if isinstance(params, dict) else params
    return any(isinstance(v, str | bytes | memoryview) and len(v) >= LONG for v in values)


def clear_bindings(connection) -> bool:
    """Clear the bindings of the connection's statements that are not running (a sqlite3
    Connection); False when one that is running was left as it is."""
    if _lib is None:
        return True
    handle = ctypes.c_void_p.from_address(id(connection) + _HANDLE_OFFSET).value
    if not handle:  # closed
        return True
    every = True
    statement = _lib.sqlite3_next_stmt(handle, None)
    while statement:
        if _lib.sqlite3_stmt_busy(statement):
            every = False
        else:
            _lib.sqlite3_clear_bindings(statement)
        statement = _lib.sqlite3_next_stmt(handle, statement)
    return every
