"""Hostile input for the database sources (opencode, opencode-go, crush, goose, cursor):
arbitrary bytes as the database, a SQLite header followed by garbage, one column of
one row set to an arbitrary value (JSON of any shape, text, numbers, a blob, NULL), or
a table dropped. The source's ``read`` never raises, and it ends with a watermark or a
quarantined row (``hostile.check_accounted``)."""

from __future__ import annotations

import json
import sqlite3
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import CORPUS_HOME
from hostile_sources import (
    check_accounted,
    db_tables,
    json_paths,
    json_values,
    place,
    read_all,
    samples,
    set_at,
)

JSON = json_values()
DBS = [s for s in (samples(CORPUS_HOME) if CORPUS_HOME.is_dir() else []) if s.mode == "sqlite"]
SETTINGS = settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None
)
pytestmark = pytest.mark.skipif(not DBS, reason="shared/corpus not present")

values = st.one_of(
    JSON.map(json.dumps),
    st.text(max_size=50),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False),
    st.binary(max_size=50),
    st.none(),
)


def _read_changed(sample, change) -> None:
    with tempfile.TemporaryDirectory() as d:
        p = place(sample, Path(d))
        change(p)
        batches = read_all(sample, p)
    check_accounted(sample, None, batches)


@pytest.mark.parametrize("sample", DBS, ids=[s.id for s in DBS])
@SETTINGS
@given(data=st.binary(max_size=3000), header=st.booleans())
def test_garbage_database(sample, data, header):
    prefix = b"SQLite format 3\x00" if header else b""
    _read_changed(sample, lambda p: p.write_bytes(prefix + data))


@pytest.mark.parametrize("sample", DBS, ids=[s.id for s in DBS])
@SETTINGS
@given(st.data())
def test_one_column_of_one_row_set_to_anything(sample, data):
    tables = {t: cols for t, cols in db_tables(sample.path).items() if cols}
    table = data.draw(st.sampled_from(sorted(tables)), label="table")
    column = data.draw(st.sampled_from(tables[table]), label="column")
    value = data.draw(values, label="value")
    nth = data.draw(st.integers(0, 20), label="row")

    def change(p: Path) -> None:
        c = sqlite3.connect(p)
        try:
            row = c.execute(f'SELECT rowid FROM "{table}" LIMIT 1 OFFSET ?', (nth,)).fetchone()
            if row is None:
                return
            try:
                c.execute(f'UPDATE "{table}" SET "{column}" = ? WHERE rowid = ?', (value, row[0]))
            except sqlite3.IntegrityError:  # a constraint refuses it: the agent could not write it either
                return
            c.commit()
        finally:
            c.close()

    _read_changed(sample, change)


def _json_cells(path: Path) -> list[tuple[str, str, int, object]]:
    """``(table, column, rowid, decoded value)`` of the first cells holding a JSON
    object or array (the agents keep message parts, tool calls and metadata so)."""
    out = []
    c = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    try:
        for table, cols in db_tables(path).items():
            for col in cols:
                for rowid, v in c.execute(f'SELECT rowid, "{col}" FROM "{table}" LIMIT 30'):
                    if isinstance(v, str) and v[:1] in "[{":
                        try:
                            out.append((table, col, rowid, json.loads(v)))
                        except ValueError:
                            pass
    finally:
        c.close()
    return out


JSON_CELLS = {s.id: _json_cells(s.path) for s in DBS}
WITH_JSON = [s for s in DBS if JSON_CELLS[s.id]]


@pytest.mark.parametrize("sample", WITH_JSON, ids=[s.id for s in WITH_JSON])
@SETTINGS
@given(st.data())
def test_one_member_of_a_json_cell_replaced(sample, data):
    """A real JSON cell (message parts, tool input …) with one member replaced by
    arbitrary JSON: what another version of the agent could write."""
    table, col, rowid, doc = data.draw(st.sampled_from(JSON_CELLS[sample.id]), label="cell")
    path = data.draw(st.sampled_from(list(json_paths(doc))), label="path")
    new = json.dumps(set_at(doc, path, data.draw(JSON, label="value")))

    def change(p: Path) -> None:
        c = sqlite3.connect(p)
        try:
            c.execute(f'UPDATE "{table}" SET "{col}" = ? WHERE rowid = ?', (new, rowid))
            c.commit()
        finally:
            c.close()

    _read_changed(sample, change)


@pytest.mark.parametrize("sample", DBS, ids=[s.id for s in DBS])
def test_each_table_dropped(sample):
    for table in db_tables(sample.path):

        def change(p: Path, table=table) -> None:
            c = sqlite3.connect(p)
            try:
                c.execute(f'DROP TABLE "{table}"')
                c.commit()
            finally:
                c.close()

        _read_changed(sample, change)


@pytest.mark.parametrize(
    "sample", [s for s in DBS if s.agent in ("crush", "opencode-go")], ids=lambda s: s.id
)
def test_message_rows_without_an_id_stay_apart(sample):
    """Found by the fuzz harness: a row whose ``id`` is '' got record id '' (so its
    entry ids would collide with such a row of any other database of the agent)."""
    with tempfile.TemporaryDirectory() as d:
        p = place(sample, Path(d))
        c = sqlite3.connect(p)
        try:
            rows = [r[0] for r in c.execute("SELECT rowid FROM messages ORDER BY rowid LIMIT 1")]
            c.execute("UPDATE messages SET id = '' WHERE rowid = ?", rows)
            c.commit()
        finally:
            c.close()
        batches = read_all(sample, p)
    check_accounted(sample, None, batches)
    ids = {e["record_id"] for b in batches for e in b.entries if e["source_offset"] in rows}
    assert len(ids) == 1 and ids.pop().endswith(f":rowid:{rows[0]}")


@pytest.mark.parametrize("value", [b"", b"\x00\xff", 1.5, "yesterday"])
def test_a_blob_or_odd_value_in_an_update_time_column(value):
    """OpenCode's ``message.time_updated`` holding a BLOB (found by the property test
    above: the vault's change marks, an aggregate of that column, went to orjson, which
    cannot write bytes, and the read failed with a TypeError); the read goes on and its
    watermark state stays JSON."""
    import orjson

    (sample,) = [s for s in DBS if s.agent == "opencode" and s.path.name == "opencode.db"]

    def change(p: Path) -> None:
        c = sqlite3.connect(p)
        try:
            c.execute(
                'UPDATE "message" SET "time_updated" = ? WHERE rowid = (SELECT min(rowid) FROM message)',
                (value,),
            )
            c.commit()
        finally:
            c.close()

    with tempfile.TemporaryDirectory() as d:
        p = place(sample, Path(d))
        change(p)
        batches = read_all(sample, p)
    check_accounted(sample, None, batches)
    for b in batches:
        if b.watermark is not None:
            orjson.dumps(b.watermark.state)
