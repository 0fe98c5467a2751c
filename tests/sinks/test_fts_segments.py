"""FTS segment merging (``sinks.sqlite.fts.merge_segments``, issue 26 target 2).

- an index spread over segments is merged into one, and every MATCH gives the same
  rows with the same BM25 values (bit for bit) before and after;
- an index mostly in one segment, or a small one, is left as it is;
- an ingest bigger than the hook path merges the store's spread indexes; the hook path
  never does.
"""

from __future__ import annotations

import datetime as dt
import random
import sqlite3
import uuid
from pathlib import Path

from ctxkeep.pipeline import engine
from ctxkeep.sinks.sqlite import fts
from session_lines import claude_lines

START = dt.datetime(2026, 11, 30, 12, tzinfo=dt.UTC)

WORDS = [f"w{i}" for i in range(60)] + ["alpha", "beta", "gamma", "delta"]
MATCHES = ['"alpha"', '"alpha" AND "beta"', '"alpha beta"', '"gamma" OR "delta"', '"w1"*']


def _table(conn: sqlite3.Connection, batches: int, rows: int, seed: int = 7) -> None:
    """``t`` (FTS5, one column; ``conn`` in autocommit) filled with ``batches`` x
    ``rows`` rows of random words: one new segment per row (automerge off: FTS5 would
    merge some as it goes; its crisis merge still merges 16 on one level)."""
    conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS t USING fts5(x)")
    conn.execute("INSERT INTO t(t, rank) VALUES('automerge', 0)")
    rnd = random.Random(seed)
    for _ in range(batches):
        conn.executemany(
            "INSERT INTO t(x) VALUES(?)",
            [(" ".join(rnd.choice(WORDS) for _ in range(60)),) for _ in range(rows)],
        )


def _ranked(conn: sqlite3.Connection) -> dict[str, list[tuple[int, float]]]:
    return {
        m: conn.execute("SELECT rowid, bm25(t) FROM t WHERE t MATCH ? ORDER BY rowid", (m,)).fetchall()
        for m in MATCHES
    }


def test_spread_segments_merge_into_one_with_the_same_rows_and_ranks(monkeypatch):
    conn = sqlite3.connect(":memory:", isolation_level=None)
    _table(conn, batches=12, rows=40)
    leaves = fts.segment_leaves(conn, "t")
    assert len(leaves) > 2 and sum(leaves) - leaves[0] >= sum(leaves) / 3  # spread
    before = _ranked(conn)
    assert all(before.values())
    monkeypatch.setattr(fts, "MERGE_MIN_LEAVES", 1)
    with conn:
        assert fts.merge_segments(conn, ("t", "absent")) == ["t"]
    assert len(fts.segment_leaves(conn, "t")) == 1
    assert _ranked(conn) == before


def test_an_index_mostly_in_one_segment_or_a_small_one_is_left_as_it_is(monkeypatch):
    conn = sqlite3.connect(":memory:", isolation_level=None)
    _table(conn, batches=12, rows=40)
    with conn:  # a small index (below MERGE_MIN_LEAVES), however spread
        assert fts.merge_segments(conn, ("t",)) == []
    assert len(fts.segment_leaves(conn, "t")) > 2
    monkeypatch.setattr(fts, "MERGE_MIN_LEAVES", 1)
    conn.execute("INSERT INTO t(t) VALUES('optimize')")
    _table(conn, batches=1, rows=1, seed=8)  # one more small segment
    leaves = fts.segment_leaves(conn, "t")
    assert len(leaves) == 2 and leaves[1] < sum(leaves) / 3
    with conn:
        assert fts.merge_segments(conn, ("t",)) == []
    assert fts.segment_leaves(conn, "t") == leaves


def _append(path: Path, lines: list[str]) -> None:
    with path.open("a") as f:
        f.write("\n".join(lines) + "\n")


def _leaves(home: Path) -> list[int]:
    with sqlite3.connect(f"file:{home / 'store.db'}?mode=ro", uri=True) as c:
        return fts.segment_leaves(c, "fts_words")


def test_a_bigger_ingest_merges_spread_segments_and_the_hook_path_does_not(tmp_path, monkeypatch):
    home = tmp_path / "home"
    sid = str(uuid.uuid4())
    lines = claude_lines(sid, 120, START, word="quokka")
    path = tmp_path / "user" / ".claude" / "projects" / "-tmp-merge" / f"{sid}.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text("\n".join(lines[:20]) + "\n")
    monkeypatch.setattr(fts, "MERGE_MIN_LEAVES", 1)
    engine.run_ingest(home, paths=[path])
    for i in range(20, 100, 20):  # hook-path ingests: a segment each, never merged
        _append(path, lines[i : i + 20])
        engine.run_ingest(home, paths=[path])
    leaves = _leaves(home)
    assert len(leaves) > 1 and sum(leaves) - leaves[0] >= sum(leaves) / 3  # spread
    monkeypatch.setattr(engine, "INCREMENTAL_CHECK_BYTES", 100)  # the next lines are "big"
    _append(path, lines[100:])
    s = engine.run_ingest(home, paths=[path])
    assert s.entries_new == 20
    assert len(_leaves(home)) == 1
    with sqlite3.connect(f"file:{home / 'store.db'}?mode=ro", uri=True) as c:
        n = c.execute("SELECT count(*) FROM fts_words WHERE fts_words MATCH 'quokka'").fetchone()[0]
        assert n == c.execute("SELECT count(*) FROM chunks WHERE text LIKE '%quokka%'").fetchone()[0] > 0


# ------------------------------------------------- a bulk load: automerge off, settled


def test_settling_a_bulk_load_leaves_fewer_than_4_segments_a_level_with_the_same_rows_and_ranks():
    conn = sqlite3.connect(":memory:", isolation_level=None)
    _table(conn, batches=40, rows=20)  # automerge 0: only the crisis merge (16 a level)
    levels = fts.level_segments(conn, "t")
    assert sum(levels) == len(fts.segment_leaves(conn, "t")) and max(levels) >= 4, levels
    before = _ranked(conn)
    assert all(before.values())
    conn.execute("INSERT INTO t(t, rank) VALUES('automerge', 4)")
    with conn:
        assert fts.settle_segments(conn, skip={"fts_words"}, tables=("t",)) > 0
    levels = fts.level_segments(conn, "t")
    assert max(levels) < 4 and sum(levels) < 6, levels
    assert _ranked(conn) == before
    with conn:  # settled: nothing more to merge
        assert fts.settle_segments(conn, tables=("t",)) == 0
    with conn:
        assert fts.settle_segments(conn, skip={"t"}, tables=("t",)) == 0


def test_a_bulk_transaction_loads_with_automerge_off_and_commits_the_setting_it_found():
    """12 statements of 200 rows in one transaction, a segment each (FTS5 writes its
    pending rows at each savepoint): with automerge 4 FTS5 merges as it goes (a level-1
    segment); inside ``bulk_begin``/``bulk_end`` it does not, and the COMMIT holds 4."""
    shapes = []
    for bulk in (False, True):
        conn = sqlite3.connect(":memory:", isolation_level=None)
        conn.execute("CREATE VIRTUAL TABLE t USING fts5(x)")
        settings = fts.automerge_settings(conn, ("t", "absent"))
        assert settings == {"t": fts.FTS5_AUTOMERGE}  # no row: FTS5's default
        rnd = random.Random(3)
        conn.execute("BEGIN")
        if bulk:
            fts.bulk_begin(conn, settings)
            assert conn.execute("SELECT v FROM t_config WHERE k='automerge'").fetchone() == (0,)
        for _ in range(12):
            conn.executemany(
                "INSERT INTO t(x) VALUES(?)",
                [(" ".join(rnd.choice(WORDS) for _ in range(60)),) for _ in range(200)],
            )
            conn.execute("SAVEPOINT s")
            conn.execute("RELEASE s")
        if bulk:
            fts.bulk_end(conn, settings)
            assert conn.execute("SELECT v FROM t_config WHERE k='automerge'").fetchone() == (4,)
        conn.execute("COMMIT")
        shapes.append(fts.level_segments(conn, "t"))
        assert fts.automerge_settings(conn, ("t",)) == {"t": 4}
    plain, bulk_shape = shapes
    assert len(plain) >= 2 and sum(plain) == 13, plain  # merged into level 1 as it went
    assert bulk_shape == [12], bulk_shape  # a segment a statement, none merged
