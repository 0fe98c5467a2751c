"""``ck_bm25``: FTS5's BM25 with each phrase's document count cached per connection.

FTS5's ``bm25()`` counts, before ranking a statement's first row, the rows holding each
phrase of the MATCH (its IDF): a walk of the phrase's whole posting list, 75-85 % of a
ranked statement on a 2 GB store (design.md "Search"). ``ck_bm25`` (``_ckrank.c``, a
small C library built at install by ``hatch_build.py``) computes the same formula
(SQLite's ``ext/fts5/fts5_aux.c``: k1 1.2, b 0.75, column weights, IDF clamped to 1e-6,
score negated) and keeps those counts per connection, keyed by (table, MATCH,
phrase), until any commit to the database by any connection, its own included
(``SQLITE_FCNTL_DATA_VERSION``; inside an explicit transaction nothing is cached): a
statement ranking a MATCH ranked before walks nothing. A phrase is counted only at the
first row whose weighted frequency of it is not 0 (below that its term is 0 whatever
the IDF): a facet filter's tokens (the facets column weighs 0) and an OR's phrases no
ranked row holds are never walked. The counts are FTS5's own, so the ranks equal
``bm25()``'s bit for bit (tests/sinks/test_native_rank.py). ``ck_bm25_top`` (a
statement reading its ``k`` best rows: ``retrieve.rank_expr``) gives those rows the same
values, and a row that cannot be among them even at length 0 that bound, without
reading its length (session 21).

Python's ``sqlite3`` cannot register an FTS5 auxiliary function, so the library is
loaded with ``ctypes``: it resolves every ``sqlite3_*`` function through the handle of
the already-loaded ``_sqlite3`` module (the SAME SQLite that owns the connection; no
second SQLite is linked), takes the ``sqlite3*`` of a connection from the first field
after ``PyObject_HEAD`` of CPython's ``pysqlite_Connection`` (CPython 3.11-3.13,
``Modules/_sqlite/connection.h``), checked before use: a limit set through Python
(``Connection.setlimit``) must read back through that pointer, and gets ``fts5_api``
through ``SELECT fts5(?1)`` (https://sqlite.org/fts5.html#extending_fts5).

Anything missing (no compiler at install, another Python, a SQLite without FTS5 or
``sqlite3_bind_pointer``, ``CTXKEEP_NATIVE_RANK=0``): ``ready`` is False and the search
ranks with ``bm25()`` (the same results, without the cache)."""

from __future__ import annotations

import ctypes
import os
import sqlite3
import sys
from pathlib import Path

#: the library ``hatch_build.py`` compiles beside this module
LIBRARY = Path(__file__).with_name("_ckrank.so")
#: environment switch: ``0`` ranks with FTS5's ``bm25()`` (benchmarks, trials)
ENV = "CTXKEEP_NATIVE_RANK"

_lib: ctypes.PyDLL | None = None
_tried = False


def _load() -> ctypes.PyDLL | None:
    """The library, initialised on Python's SQLite; None when unavailable (once)."""
    global _lib, _tried
    if _tried:
        return _lib
    _tried = True
    if os.environ.get(ENV) == "0" or sys.implementation.name != "cpython":
        return None
    if not (3, 11) <= sys.version_info[:2] <= (3, 13) or not LIBRARY.is_file():
        return None
    try:
        import _sqlite3  # the module that loaded SQLite: its handle finds SQLite's symbols

        lib = ctypes.PyDLL(str(LIBRARY))  # PyDLL: calls keep the GIL
        handle = ctypes.CDLL(_sqlite3.__file__)._handle
        lib.ck_init.argtypes = [ctypes.c_void_p]
        lib.ck_limit.argtypes = [ctypes.c_void_p, ctypes.c_int]
        lib.ck_registered.argtypes = [ctypes.c_void_p]
        lib.ck_register.argtypes = [ctypes.c_void_p]
        lib.ck_stats.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
        lib.ck_top_stats.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
        lib.ck_data_version.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        lib.ck_cached_count.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_void_p]
        lib.ck_put_count.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_longlong]
        if not lib.ck_init(handle) or lib.ck_libversion() != _version_number():
            return None
    except (OSError, AttributeError, ImportError):
        return None
    _lib = lib
    return lib


def _version_number() -> int:
    """Python's SQLite version as ``sqlite3_libversion_number()`` gives it (3040001)."""
    major, minor, patch = sqlite3.sqlite_version_info
    return major * 1_000_000 + minor * 1000 + patch


def _db(conn: sqlite3.Connection) -> int:
    """The ``sqlite3*`` of ``conn``: the first field after ``PyObject_HEAD``."""
    return ctypes.c_void_p.from_address(id(conn) + object.__basicsize__).value or 0


def _verified(lib: ctypes.PyDLL, conn: sqlite3.Connection, db: int) -> bool:
    """True when ``db`` is ``conn``'s connection: a variable-number limit set through
    Python reads back through ``db`` (then restored)."""
    if not db:
        return False
    limit = sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER
    try:
        old = conn.getlimit(limit)
        probe = old - 7 if old > 64 else old + 7
        conn.setlimit(limit, probe)
        try:
            seen = lib.ck_limit(db, limit)
        finally:
            conn.setlimit(limit, old)
    except (sqlite3.Error, AttributeError):
        return False
    return seen == probe


def ready(conn: sqlite3.Connection) -> bool:
    """True when ``ck_bm25`` can rank on ``conn`` (registered now if it was not)."""
    lib = _load()
    if lib is None:
        return False
    db = _db(conn)
    if db and lib.ck_registered(db):
        return True
    return _verified(lib, conn, db) and lib.ck_register(db) == 0


def data_version(conn: sqlite3.Connection) -> int | None:
    """The data version of ``conn``'s main database (``SQLITE_FCNTL_DATA_VERSION``: it
    changes with every commit to it by any connection, ``conn``'s own included, and
    with nothing else, not a write to the ``temp`` schema), or None without the library.
    ``PRAGMA data_version`` does not change with the connection's own commits, and
    ``total_changes`` counts its ``temp`` writes too (the "did you mean" probe)."""
    lib = _load()
    db = _db(conn)
    out = ctypes.c_uint(0)
    if lib is None or not db or not (lib.ck_registered(db) or _verified(lib, conn, db)):
        return None
    return out.value if lib.ck_data_version(db, ctypes.byref(out)) == 0 else None


def cached_count(conn: sqlite3.Connection, table: str, phrase: str) -> int | None:
    """The document count ``ck_bm25`` keeps on ``conn`` for ``phrase`` of ``table`` (a
    part of ``retrieve.phrase_keys``: ``'"exit"'``, ``'"validateUs"*'``), or None when
    it keeps none (never ranked there, the database changed since, no library). Only
    reads: a phrase is counted by ranking it."""
    lib = _load()
    db = _db(conn)
    if lib is None or not db:
        return None
    key = f"{table}\x1e{phrase}".encode()
    out = ctypes.c_longlong(0)
    return out.value if lib.ck_cached_count(db, key, len(key), ctypes.byref(out)) else None


def put_count(conn: sqlite3.Connection, table: str, phrase: str, count: int) -> bool:
    """Keep ``count`` on ``conn`` as ``phrase``'s document count in ``table`` (as
    ``cached_count`` reads it back), as if ``conn`` had counted it: a partition of one
    statement run on a second connection ranks with the counts the first keeps
    (``query.search.split``). ``conn``'s cache is checked against its data version
    first, so a commit it has not seen yet empties it (this count too) at its next
    statement: ``count`` must be valid for the database as it is now (read with
    ``cached_count`` right after ``PRAGMA data_version`` on the connection keeping it).
    False when not kept (no library, not registered, inside a transaction)."""
    lib = _load()
    db = _db(conn)
    if lib is None or not db or not ready(conn):
        return False
    key = f"{table}\x1e{phrase}".encode()
    return bool(lib.ck_put_count(db, key, len(key), count))


def stats(conn: sqlite3.Connection) -> tuple[int, int]:
    """``(hits, misses)`` of ``conn``'s count cache since it was registered ((0, 0)
    without ``ck_bm25``)."""
    lib = _load()
    hits, misses = ctypes.c_longlong(0), ctypes.c_longlong(0)
    if lib is None or not lib.ck_stats(_db(conn), ctypes.byref(hits), ctypes.byref(misses)):
        return 0, 0
    return hits.value, misses.value


def top_stats(conn: sqlite3.Connection) -> tuple[int, int]:
    """``(ranked, bounded)``: the rows ``ck_bm25_top`` ranked on ``conn`` since it was
    registered (their length read) and those it gave their bound instead ((0, 0)
    without the library)."""
    lib = _load()
    ranked, bounded = ctypes.c_longlong(0), ctypes.c_longlong(0)
    if lib is None or not lib.ck_top_stats(_db(conn), ctypes.byref(ranked), ctypes.byref(bounded)):
        return 0, 0
    return ranked.value, bounded.value


def clear() -> None:
    """Empty the count cache of every connection of this process (benchmarks: a search
    without counts from earlier searches, as one ``ctxkeep search`` process runs it)."""
    lib = _load()
    if lib is not None:
        lib.ck_clear_all()
