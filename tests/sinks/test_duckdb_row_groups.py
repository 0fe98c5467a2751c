"""An ingest's appends to DuckDB fill whole row groups: the automatic checkpoint (at
16 MiB of WAL, in the middle of a row group) is off while they run, and a checkpoint
follows each full row group, so no checkpoint's vacuum has partial row groups to merge
(the rewrite that cost a 2 GB ingest a transient +276 MB RSS)."""

from __future__ import annotations

import duckdb
import polars as pl

from ctxkeep.schema import ENTRY_SCHEMA, STORED_COLUMNS
from ctxkeep.sinks import duckdb as duckdb_store

APPEND = 50_000


def _frame(first: int, n: int) -> pl.DataFrame:
    """``n`` entries with high-entropy texts (so the WAL grows as with real ids)."""
    i = pl.int_range(first, first + n, eager=True, dtype=pl.Int64)
    cols = {}
    for k, c in enumerate(STORED_COLUMNS):
        t = ENTRY_SCHEMA[c]
        if t == pl.String:
            cols[c] = i.hash(seed=k).cast(pl.String) + i.hash(seed=k + 100).cast(pl.String)
        elif t == pl.Boolean:
            cols[c] = i % 2 == 0
        elif isinstance(t, pl.Datetime):
            cols[c] = (i * 1_000_000).cast(pl.Datetime("us", "UTC"))
        else:
            cols[c] = i.cast(t)
    return pl.DataFrame(cols).select([pl.col(c).cast(ENTRY_SCHEMA[c]) for c in STORED_COLUMNS])


def _row_groups(con) -> list[int]:
    return [
        r[1]
        for r in con.execute(
            "SELECT row_group_id, sum(count) FROM pragma_storage_info('entries') "
            "WHERE column_id = 0 AND segment_type <> 'VALIDITY' GROUP BY 1 ORDER BY 1"
        ).fetchall()
    ]


def test_appends_fill_whole_row_groups(tmp_path):
    con = duckdb_store.connect(tmp_path)
    wal = tmp_path / (duckdb_store.DB_NAME + ".wal")
    try:
        default = con.execute("SELECT current_setting('checkpoint_threshold')").fetchall()[0][0]
        threads = con.execute("SELECT current_setting('threads')").fetchall()[0][0]
        appends = duckdb_store.EntryAppends(con)
        # the appends run in the calling thread alone (no worker pool spinning per append)
        assert con.execute("SELECT current_setting('threads')").fetchall()[0][0] == 1
        first = 1
        for k in range(6):
            assert appends.append(first, _frame(first, APPEND).to_arrow()) == APPEND
            first += APPEND
            if k == 1:  # 100,000 rows: past 16 MiB of WAL, not yet a row group
                assert wal.stat().st_size > 16 * 2**20
                persisted = "SELECT count(*) FILTER (WHERE persistent) FROM pragma_storage_info('entries')"
                assert con.execute(persisted).fetchall()[0][0] == 0
        assert appends.append(1, _frame(1, 10).to_arrow()) == 0  # already there
        appends.close()
        assert con.execute("SELECT current_setting('checkpoint_threshold')").fetchall()[0][0] == default
        assert (
            con.execute("SELECT current_setting('threads')").fetchall()[0][0] == threads
        )  # the closing sync's
        con.execute("CHECKPOINT")
        total = 6 * APPEND
        rg = duckdb_store.ROW_GROUP_ROWS
        assert _row_groups(con) == [rg, rg, total - 2 * rg]
        got = con.execute("SELECT count(*), min(sqlite_rowid), max(sqlite_rowid) FROM entries").fetchall()[0]
        assert got == (total, 1, total)
        # the entries are those appended, each once
        want = _frame(1, total).select(pl.col("entry_id").sort()).to_series().to_list()
        assert [
            r[0] for r in con.execute("SELECT entry_id FROM entries ORDER BY entry_id").fetchall()
        ] == want
    finally:
        con.close()
    ro = duckdb.connect(str(tmp_path / duckdb_store.DB_NAME), read_only=True)
    try:
        assert ro.execute("SELECT count(*) FROM entries").fetchall()[0][0] == 6 * APPEND
    finally:
        ro.close()
