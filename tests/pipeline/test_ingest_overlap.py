"""The overlapped ingest (issue 2's wall-time target) stores what a sequential ingest
stores: the writer thread (the load of group k overlaps the transform of group k+1)
dedups against the groups still in flight, keeps commit order and stops at the first
failed group; the DuckDB sync thread (Arrow append of committed groups) ends with the
DuckDB tables a sync from SQLite builds, and its errors never fail the ingest.

Handmade records follow the Claude Code transcript shape of ``fixtures/bad_input.py``.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import sqlite3
import threading
import time
from pathlib import Path

import duckdb
import pytest

from conftest import CORPUS_HOME
from ctxkeep.pipeline import engine as pipeline
from ctxkeep.pipeline import reader_process as read_worker
from ctxkeep.pipeline import transform
from ctxkeep.pipeline import writer as writer_mod
from ctxkeep.pipeline.analytics_sync import AnalyticsSyncer, sync_analytics
from ctxkeep.pipeline.plan import plan
from ctxkeep.pipeline.readahead import ReadAhead, ReadItem, read_files
from ctxkeep.sinks import duckdb as duckdb_store
from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sources.contract import DiscoveryContext
from ctxkeep.transforms.chunk import chunk_text
from ctxkeep.transforms.normalize import normalized_rows
from fixtures.bad_input import line, rec
from store_digest import store_digest as _fingerprint

#: small groups, so that the corpus makes many groups and several are in flight
SMALL_GROUP = 128 * 1024


def _corpus_ctx() -> DiscoveryContext:
    if not CORPUS_HOME.is_dir():
        pytest.skip("shared/corpus not present")
    return DiscoveryContext(home=CORPUS_HOME, env={})


def _ingest(
    home: Path, ctx: DiscoveryContext, *, writer: bool, group_bytes: int = SMALL_GROUP, on_commit=None
) -> dict:
    conn = sqlite_store.connect(home)
    try:
        p = plan(home, conn, ctx=ctx)
        return pipeline.ingest_files(
            conn,
            p.todo,
            sqlite_store.tombstoned(conn),
            group_bytes=group_bytes,
            on_commit=on_commit,
            writer=writer,
        )
    finally:
        conn.close()


def test_writer_thread_stores_what_a_sequential_ingest_stores(tmp_path):
    ctx = _corpus_ctx()
    seq = _ingest(tmp_path / "seq", ctx, writer=False)
    par = _ingest(tmp_path / "par", ctx, writer=True)
    assert par == seq
    # 27 session files and a sub-agent's .meta.json (a sidecar: bytes, no record)
    assert (seq["entries_new"], seq["files_read"], seq["lines"]) == (3890, 28, 3665)
    a, b = _fingerprint(tmp_path / "seq"), _fingerprint(tmp_path / "par")
    assert b == a
    # contents: a Codex result that failed (a non-zero exit code, stored with the
    # ``[error] `` prefix) is another text than the same output of a call that did not
    assert (a["entries"][0], a["contents"][0], a["chunks"][0], a["fts_words"], a["usage"][0]) == (
        3890,
        2406,
        2683,
        2683,
        905,
    )
    # a second run over the same files adds nothing, with or without the writer
    assert _ingest(tmp_path / "par", ctx, writer=True)["entries_new"] == 0


def _two_files_sharing_a_text(tmp_path) -> tuple[DiscoveryContext, str]:
    """Two Claude Code transcripts whose records differ but hold the same long text."""
    home = tmp_path / "home"
    proj = home / ".claude" / "projects" / "-tmp-overlap"
    proj.mkdir(parents=True)
    text = "".join(f"line {i}: the same tool output in two sessions\n" for i in range(400))
    (proj / "a.jsonl").write_bytes(line(rec(1)) + line(rec(2, text)))
    other = dict(rec(3, text), sessionId="5e551011-0000-4000-8000-000000000002")
    (proj / "b.jsonl").write_bytes(line(other) + line(rec(4)))
    return DiscoveryContext(home=home, env={}), text


def test_a_content_new_in_two_groups_in_flight_is_stored_and_indexed_once(tmp_path, monkeypatch):
    ctx, text = _two_files_sharing_a_text(tmp_path)
    h = hashlib.sha256(text.encode()).hexdigest()
    real = sqlite_store.load_batch
    started = threading.Event()
    transformed_while_loading = []

    def slow_load(conn, **kw):  # group 1 stays uncommitted while group 2 is transformed
        started.set()
        time.sleep(0.5)
        return real(conn, **kw)

    real_transform = transform.transform_batch

    def watch_transform(conn, batch, tombs, seen=None, **kw):
        if transformed_while_loading:  # group 2: once group 1's load has begun
            assert started.wait(10)
            with sqlite3.connect(tmp_path / "store" / "store.db") as c:
                transformed_while_loading.append(c.execute("SELECT count(*) FROM entries").fetchone()[0])
        else:
            transformed_while_loading.append(started.is_set())
        return real_transform(conn, batch, tombs, seen, **kw)

    monkeypatch.setattr(sqlite_store, "load_batch", slow_load)
    monkeypatch.setattr(transform, "transform_batch", watch_transform)
    r = _ingest(tmp_path / "store", ctx, writer=True, group_bytes=1)  # one group per file
    # group 2 was transformed while group 1 was loading, uncommitted (0 entries stored)
    assert transformed_while_loading == [False, 0]
    assert r["entries_new"] == 4
    conn = sqlite3.connect(tmp_path / "store" / "store.db")
    try:
        assert conn.execute("SELECT count(*) FROM contents WHERE content_hash = ?", (h,)).fetchone()[0] == 1
        n_chunks = conn.execute(
            "SELECT count(*) FROM chunks ch JOIN contents c ON c.content_id = "
            "ch.content_id WHERE c.content_hash = ?",
            (h,),
        ).fetchone()[0]
        assert n_chunks == len(chunk_text(text)) == 5
        assert (
            conn.execute("SELECT count(*) FROM fts_words").fetchone()[0]
            == conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
            == 5 + 2
        )
        toks = conn.execute(
            "SELECT token_estimate FROM entries WHERE content_hash = ? ORDER BY rowid", (h,)
        ).fetchall()
        assert len(toks) == 2 and toks[0] == toks[1] and toks[0][0] > 1000
        assert sqlite_store.content_text(conn, h) == text
    finally:
        conn.close()


def test_transform_batch_treats_seen_contents_as_known(store_home, tmp_path):
    ctx, text = _two_files_sharing_a_text(tmp_path)
    from ctxkeep.sources import SOURCES

    conn = sqlite_store.connect(store_home)
    try:
        p = plan(store_home, conn, ctx=ctx)
        batches = [b for f, wm in p.todo for b in SOURCES[f.agent].read(f, wm)]
        seen = transform.InFlight()
        first = transform.transform_batch(conn, batches[0], {}, seen)
        second = transform.transform_batch(conn, batches[1], {}, seen)
        again = transform.transform_batch(conn, batches[1], {}, seen)
    finally:
        conn.close()
    h = hashlib.sha256(text.encode()).hexdigest()
    assert h in first["contents"]["content_hash"].to_list()
    assert first["chunks"].height == 5 + 1
    # the shared text is known from the first group: no content, no chunks, same tokens
    assert h not in second["contents"]["content_hash"].to_list()
    assert second["chunks"].height == 1 and second["entries"].height == 2
    tok = dict(zip(first["entries"]["content_hash"], first["entries"]["token_estimate"], strict=False))[h]
    assert (
        dict(zip(second["entries"]["content_hash"], second["entries"]["token_estimate"], strict=False))[h]
        == tok
    )
    # the same batch again: its entries are in flight, nothing is new
    assert again["entries"].height == 0 and again["contents"].height == 0
    assert len(seen.entries) == 4 and seen.contents[h] == tok


@pytest.mark.parametrize("txn_rows", [1, 100_000])
def test_a_failed_group_stops_the_writer_and_later_groups_are_not_stored(tmp_path, monkeypatch, txn_rows):
    """The second group fails: nothing after it is loaded. With a transaction a group
    (``txn_rows`` 1) the first group stays committed with its watermarks; with both
    groups in one transaction, the failed load rolls the transaction back whole (no
    savepoint: ``sinks.sqlite.write``) and nothing is stored. Either way the next
    ingest completes the store."""
    ctx = _corpus_ctx()
    monkeypatch.setattr(writer_mod, "TXN_ROWS", txn_rows)
    real = sqlite_store.load_batch
    calls = []

    def fail_second(conn, **kw):
        calls.append(kw["entries"].height)
        if len(calls) == 2:
            raise RuntimeError("disk full (test)")
        return real(conn, **kw)

    monkeypatch.setattr(sqlite_store, "load_batch", fail_second)
    with pytest.raises(RuntimeError, match="disk full"):
        _ingest(tmp_path / "store", ctx, writer=True)
    assert len(calls) == 2  # nothing after the failed group was loaded
    assert not any(t.name == "ctxkeep-writer" and t.is_alive() for t in threading.enumerate())
    conn = sqlite3.connect(tmp_path / "store" / "store.db")
    try:
        n = conn.execute("SELECT count(*) FROM entries").fetchone()[0]
        # the first group's files have their watermark, no later file has one
        marked = {r[0] for r in conn.execute("SELECT path FROM watermarks")}
        srcs = {r[0] for r in conn.execute("SELECT DISTINCT source_path FROM entries")}
    finally:
        conn.close()
    if txn_rows == 1:
        assert n == calls[0] > 0 and marked and marked <= srcs
    else:
        assert calls[0] > 0 and n == 0 and not marked
    monkeypatch.setattr(sqlite_store, "load_batch", real)
    _ingest(tmp_path / "store", ctx, writer=True)
    _ingest(tmp_path / "ref", ctx, writer=True)
    assert _fingerprint(tmp_path / "store") == _fingerprint(tmp_path / "ref")


def _duck_rows(home: Path) -> tuple[list, list]:
    con = duckdb.connect(str(home / duckdb_store.DB_NAME), read_only=True)
    try:
        ents = con.execute("SELECT * FROM entries ORDER BY sqlite_rowid").fetchall()
        usage = con.execute("SELECT * FROM usage ORDER BY usage_key").fetchall()
    finally:
        con.close()
    return ents, usage


def test_the_sync_thread_builds_the_duckdb_a_sync_from_sqlite_builds(tmp_path):
    ctx = _corpus_ctx()
    home = tmp_path / "store"
    syncer = AnalyticsSyncer(home)
    r = _ingest(home, ctx, writer=True, on_commit=syncer.on_commit)
    note = syncer.finish()
    assert note == f"analytics: {r['entries_new']} entries synced"
    # the committed groups went to DuckDB from Arrow, not read back from SQLite
    assert syncer.appended == r["entries_new"] == 3890
    # reference: the same SQLite store synced from scratch
    ref = tmp_path / "ref"
    ref.mkdir()
    shutil.copy(home / "store.db", ref / "store.db")
    conn = sqlite_store.connect(ref)
    try:
        duckdb_store.sync(conn, ref)
    finally:
        conn.close()
    got, want = _duck_rows(home), _duck_rows(ref)
    assert len(got[0]) == len(want[0]) == r["entries_new"]
    assert got == want


def test_append_entries_only_follows_the_high_water_mark(tmp_path, corpus_store):
    src, _ = corpus_store
    conn = sqlite_store.connect(src, readonly=True)
    try:
        import polars as pl

        from ctxkeep.schema import ENTRY_SCHEMA, STORED_COLUMNS

        rows = conn.execute(
            f"SELECT rowid, {', '.join(STORED_COLUMNS)} FROM entries ORDER BY rowid LIMIT 30"
        ).fetchall()
    finally:
        conn.close()
    frame = (
        pl.DataFrame([r[1:] for r in rows], schema=STORED_COLUMNS, orient="row")
        .with_columns(
            pl.col("ts").str.to_datetime("%Y-%m-%dT%H:%M:%S%.fZ", time_zone="UTC"),
            pl.col("is_sidechain").cast(pl.Boolean),
        )
        .select([pl.col(c).cast(ENTRY_SCHEMA[c]) for c in STORED_COLUMNS])
    )
    first = rows[0][0]
    con = duckdb_store.connect(tmp_path)
    try:
        if first != 1:
            pytest.skip("corpus store rowids do not start at 1")
        assert duckdb_store.append_entries(con, 11, frame[10:20].to_arrow()) is None  # gap
        assert duckdb_store.append_entries(con, 1, frame[:10].to_arrow()) == 10
        assert duckdb_store.append_entries(con, 1, frame[:10].to_arrow()) == 0  # already there
        assert duckdb_store.append_entries(con, 11, frame[10:30].to_arrow()) == 20
        got = con.execute("SELECT sqlite_rowid, entry_id FROM entries ORDER BY sqlite_rowid").fetchall()
    finally:
        con.close()
    assert got == [(r[0], r[1]) for r in rows]


def test_a_duckdb_error_in_the_sync_thread_does_not_fail_the_ingest(tmp_path, monkeypatch):
    ctx = _corpus_ctx()
    home = tmp_path / "store"

    def held(*a, **k):
        raise duckdb.IOException(
            'Could not set lock on file "analytics.duckdb": Conflicting lock is held (test)'
        )

    monkeypatch.setattr(duckdb_store, "connect", held)
    s = pipeline.run_ingest(home, ctx=ctx)
    assert s.entries_new == 3890
    assert s.analytics.startswith("analytics store not updated (IOException: Could not set lock")
    assert s.analytics.endswith("the next ingest catches up")
    assert not any(t.name == "ctxkeep-analytics" and t.is_alive() for t in threading.enumerate())
    conn = sqlite_store.connect(home)
    try:
        assert conn.execute("SELECT status FROM runs ORDER BY run_id DESC").fetchone()[0] == "ok"
        assert conn.execute("SELECT count(*) FROM entries").fetchone()[0] == s.entries_new
        monkeypatch.undo()  # the file is free again: the next sync catches up
        assert sync_analytics(conn, home) == f"analytics: {s.entries_new} entries synced"
    finally:
        conn.close()


def test_an_ingest_with_nothing_new_catches_up_a_failed_sync(tmp_path, monkeypatch):
    """A DuckDB sync that failed (or was interrupted) is caught up by the next ingest,
    also when that ingest finds nothing new: SQLite records how far DuckDB holds it."""
    from typer.testing import CliRunner

    from ctxkeep.cli import app

    ctx = _corpus_ctx()
    home = tmp_path / "store"

    def held(*a, **k):
        raise duckdb.IOException("Could not set lock on file (test)")

    monkeypatch.setattr(duckdb_store, "connect", held)
    s = pipeline.run_ingest(home, ctx=ctx)
    assert s.entries_new == 3890 and s.analytics.startswith("analytics store not updated")
    conn = sqlite_store.connect(home, readonly=True)
    assert sqlite_store.analytics_behind(conn)
    conn.close()
    monkeypatch.undo()
    s2 = pipeline.run_ingest(home, ctx=ctx)
    assert s2.entries_new == 0 and s2.bytes == 0
    assert s2.analytics == "analytics: 3890 entries synced"
    conn = sqlite_store.connect(home, readonly=True)
    assert not sqlite_store.analytics_behind(conn)
    conn.close()
    con = duckdb.connect(str(home / duckdb_store.DB_NAME), read_only=True)
    assert con.execute("SELECT count(*) FROM entries").fetchall() == [(3890,)]
    con.close()
    # the CLI's no-op path (nothing to read) catches up as well, without Prefect
    (home / duckdb_store.DB_NAME).unlink()
    with sqlite_store.connect(home) as c:
        c.execute("UPDATE meta SET value='0' WHERE key='analytics_entries_rowid'")
    r = CliRunner().invoke(
        app,
        ["ingest", "--home", str(home), "--json", "--agent", "codex", "--path", str(CORPUS_HOME / ".codex")],
    )
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["analytics"] == "analytics: 3890 entries synced"


def test_a_deleted_analytics_store_is_rebuilt_by_the_next_ingest_and_by_doctor(tmp_path):
    """``analytics.duckdb`` deleted while SQLite's marks say it is in step: the reports
    say it is missing and how to rebuild it, doctor calls it damaged and ``--repair``
    rebuilds it, and so does an ingest with nothing new (the CLI's no-op path)."""
    from typer.testing import CliRunner

    from ctxkeep.cli import app

    home = tmp_path / "store"
    assert pipeline.run_ingest(home, ctx=_corpus_ctx()).entries_new == 3890
    duck = home / duckdb_store.DB_NAME
    runner = CliRunner()
    for _ in ("doctor", "ingest"):
        duck.unlink()
        conn = sqlite_store.connect(home, readonly=True)
        assert not sqlite_store.analytics_behind(conn)  # the marks alone cannot tell
        conn.close()
        r = runner.invoke(app, ["report", "daily", "--home", str(home)])
        assert r.exit_code == 1
        assert "error: the analytics store is missing" in r.output and "run `ctxkeep ingest`" in r.output
        if _ == "doctor":
            r = runner.invoke(app, ["doctor", "--home", str(home), "--json"])
            assert r.exit_code == 1 and json.loads(r.stdout)["damaged"] == [str(duck)]
            r = runner.invoke(app, ["doctor", "--repair", "--home", str(home), "--json"])
            rep = json.loads(r.stdout)
            assert r.exit_code == 0 and rep["damaged"] == [], r.output
            assert "analytics rebuilt: 3,890 entries" in rep["repair"]["actions"]
        else:
            r = runner.invoke(
                app,
                [
                    "ingest",
                    "--home",
                    str(home),
                    "--json",
                    "--agent",
                    "codex",
                    "--path",
                    str(CORPUS_HOME / ".codex"),
                ],
            )
            assert r.exit_code == 0, r.output
            assert json.loads(r.stdout)["analytics"] == "analytics: 3890 entries synced"
        con = duckdb.connect(str(duck), read_only=True)
        assert con.execute("SELECT count(*) FROM entries").fetchall() == [(3890,)]
        con.close()


def test_a_reader_process_yields_what_the_reader_thread_yields(tmp_path, monkeypatch):
    ctx = _corpus_ctx()
    seq = _ingest(tmp_path / "seq", ctx, writer=False)
    monkeypatch.setattr(pipeline, "PROCESS_READ_BYTES", 0)  # every ingest reads in a process
    started = []
    real = read_worker.read_in_process

    def spy(todo, **kw):
        started.append(len(todo))
        return real(todo, **kw)

    monkeypatch.setattr(read_worker, "read_in_process", spy)
    par = _ingest(tmp_path / "par", ctx, writer=True)
    assert started == [28] and par == seq
    assert _fingerprint(tmp_path / "par") == _fingerprint(tmp_path / "seq")


def test_the_reader_process_raises_the_readers_error_and_stops_when_closed(tmp_path, monkeypatch):
    ctx = _corpus_ctx()
    procs = []
    real_popen = read_worker.subprocess.Popen

    def popen(*a, **k):
        procs.append(real_popen(*a, **k))
        return procs[-1]

    monkeypatch.setattr(read_worker.subprocess, "Popen", popen)
    # tokens and chunks counted ahead whether or not the ingest is behind (``precompute_now``)
    monkeypatch.setenv("CTXKEEP_READER_PRECOMPUTE", "always")
    conn = sqlite_store.connect(tmp_path)
    try:
        todo = plan(tmp_path, conn, ctx=ctx).todo
    finally:
        conn.close()
    f, wm = todo[0]
    bad = [todo[0], (type(f)("no-such-agent", f.path, f.mode, f.meta), wm)]
    got = []
    with pytest.raises(KeyError, match="no-such-agent"):
        for item in read_worker.read_in_process(bad):
            got.append(item)
    # the first file's batches and its closing item came before the error
    assert got and got[-1] == ReadItem(f, None, True) and all(i.file == f for i in got)
    # batches come with their entries normalized in the process, entry dicts left there
    direct = [i.batch for i in read_files(todo[:1]) if i.batch is not None]
    batches = [i for i in got if i.batch is not None]
    assert [i.n_entries for i in batches] == [i.entries for i in batches] == [
        len(b.entries) for b in direct
    ] and direct
    assert all(i.batch.entries == [] and i.rows is not None for i in batches)
    assert [i.rows.to_dicts() for i in batches] == [normalized_rows(b.entries).to_dicts() for b in direct]
    assert batches[0].ahead is not None  # the chunk's first batch brings its contents' tokens
    gen = read_worker.read_in_process(todo)
    first = next(gen)
    assert first.file == todo[0][0]
    assert procs[-1].poll() is None  # still reading ahead
    gen.close()  # the process is killed and reaped
    assert len(procs) == 2 and procs[-1].returncode is not None
    assert procs[0].returncode == 0  # the failing reader ended by itself


def test_an_in_memory_store_is_loaded_without_a_writer_thread(tmp_path, monkeypatch):
    ctx, text = _two_files_sharing_a_text(tmp_path)
    conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    sqlite_store.ensure_schema(conn)
    assert sqlite_store.sibling(conn) is None
    started = []
    real_start = threading.Thread.start

    def start(self):
        started.append(self.name)
        return real_start(self)

    monkeypatch.setattr(threading.Thread, "start", start)
    p = plan(tmp_path / "home-store", conn, ctx=ctx)
    r = pipeline.ingest_files(conn, p.todo, {}, group_bytes=1, writer=True)
    assert "ctxkeep-writer" not in started
    assert r["entries_new"] == 4 and r["files_read"] == 2
    h = hashlib.sha256(text.encode()).hexdigest()
    assert sqlite_store.content_text(conn, h) == text
    assert conn.execute("SELECT count(*) FROM chunks").fetchone()[0] == 5 + 2


def test_precomputed_gives_what_estimate_tokens_and_chunks_frame_give():
    import polars as pl

    from ctxkeep.transforms.chunk import chunks_frame
    from ctxkeep.transforms.tokens import estimate_tokens

    texts = ["short text", "## Heading\n" + "a line of a long tool output\n" * 400, "第三个 text"]
    hashes = [hashlib.sha256(t.encode()).hexdigest() for t in texts]
    contents = pl.DataFrame({"content_hash": hashes, "text": texts})
    counts, methods = estimate_tokens(texts)
    pre = transform.Precomputed()
    pre.add(
        pl.DataFrame({"content_hash": hashes[:2], "token_estimate": counts[:2], "token_method": methods[:2]}),
        chunks_frame(contents[:2]),
    )
    pre.add(
        pl.DataFrame({"content_hash": hashes[2:], "token_estimate": counts[2:], "token_method": methods[2:]}),
        chunks_frame(contents[2:]),
    )
    assert pre.take([hashes[0], "f" * 64]) is None  # one not computed ahead: compute all here
    order = [2, 1]
    c, m, rows = pre.take([hashes[i] for i in order])
    assert c == [counts[i] for i in order] and m == [methods[i] for i in order]
    want = chunks_frame(contents[order])
    assert rows.height == want.height == 1 + len(chunk_text(texts[1]))
    assert rows.equals(want)
    assert pre.take([hashes[1]]) is None  # taken once
    c0, _, rows0 = pre.take([hashes[0]])
    assert c0 == [counts[0]] and rows0.equals(chunks_frame(contents[:1]))


def test_precomputed_fill_takes_what_it_holds_and_computes_the_rest():
    import polars as pl

    from ctxkeep.transforms.chunk import chunks_frame
    from ctxkeep.transforms.tokens import estimate_tokens

    texts = [
        "short text",
        "## Heading\n" + "a line of a long tool output\n" * 400,
        "第三个 text",
        "validateUserInput " * 700,
        "",
    ]
    hashes = [hashlib.sha256(t.encode()).hexdigest() for t in texts]
    contents = pl.DataFrame({"content_hash": hashes, "text": texts})
    counts, methods = estimate_tokens(texts)
    pre = transform.Precomputed()
    assert pre.fill(contents) is None  # nothing held: all computed by the caller
    sent = [1, 3]  # the reader process sent these two; the others come without
    pre.add(
        pl.DataFrame(
            {
                "content_hash": [hashes[i] for i in sent],
                "token_estimate": [counts[i] for i in sent],
                "token_method": [methods[i] for i in sent],
            }
        ),
        chunks_frame(contents[sent]),
    )
    c, m, rows = pre.fill(contents)
    assert c == counts and m == methods
    want = chunks_frame(contents)
    assert rows.height == want.height > len(texts)
    assert rows.equals(want)  # the same rows in the same order: chunk ids as before
    assert not pre.tokens and sum(x.height for x in pre.chunks) == 0  # taken
    pre.add(
        pl.DataFrame({"content_hash": hashes, "token_estimate": counts, "token_method": methods}),
        want,
    )
    c, m, rows = pre.fill(contents)  # all held: as ``take``
    assert c == counts and rows.equals(want)


def test_precomputed_chunks_without_tokens_are_taken_and_their_tokens_counted_here(monkeypatch):
    """A first ingest's early reader cuts chunks and index terms but counts no tokens
    (``reader_process._precompute(counted=False)``, ``--precompute chunks``): ``fill``
    takes its chunk rows (with their index terms, in ``chunks_frame``'s order) and counts
    the tokens here, beside contents counted ahead and contents not sent at all."""
    import polars as pl

    from ctxkeep.transforms import tokens
    from ctxkeep.transforms.chunk import chunks_frame
    from ctxkeep.transforms.tokens import estimate_tokens

    texts = [
        "short text",
        "## Heading\n" + "a line of a long tool output\n" * 400,
        "第三个 text",
        "validateUserInput " * 700,
        "",
        'fn main() { println!("x"); }',
    ]
    hashes = [hashlib.sha256(t.encode()).hexdigest() for t in texts]
    contents = pl.DataFrame({"content_hash": hashes, "text": texts})
    counts, methods = estimate_tokens(texts)
    want = chunks_frame(contents, index_terms=True)

    # what the reader sends: content_hash alone and the chunk rows with their terms
    known: set[int] = set()
    real = tokens.estimate_tokens
    monkeypatch.setattr(tokens, "estimate_tokens", lambda t: pytest.fail("counted in the reader"))
    got = read_worker._precompute(contents[[1, 3, 4]], known, counted=False)
    monkeypatch.setattr(tokens, "estimate_tokens", real)
    assert got is not None
    sent, sent_chunks = (pl.read_ipc(io.BytesIO(b)) for b in got)
    assert sent.columns == ["content_hash"] and sent["content_hash"].to_list() == [
        hashes[i] for i in (1, 3, 4)
    ]
    assert sent_chunks.equals(chunks_frame(contents[[1, 3, 4]], index_terms=True))

    pre = transform.Precomputed()
    pre.add(sent, sent_chunks)
    assert pre.cut == {hashes[i] for i in (1, 3, 4)} and not pre.tokens
    assert pre.take([hashes[1]]) is None  # no token count held: not taken whole
    counted = [0, 5]  # counted ahead by another reader
    pre.add(
        pl.DataFrame(
            {
                "content_hash": [hashes[i] for i in counted],
                "token_estimate": [counts[i] for i in counted],
                "token_method": [methods[i] for i in counted],
            }
        ),
        chunks_frame(contents[counted], index_terms=True),
    )
    pre.add(sent, sent_chunks)  # sent again (a reader past KNOWN_MAX): held once
    c, m, rows = pre.fill(contents)  # text 2 was not sent at all: computed here
    assert c == counts and m == methods
    assert rows.height == want.height > len(texts)
    assert rows.equals(want)  # the same rows, terms and order: chunk ids as before
    assert not pre.tokens and not pre.cut and sum(x.height for x in pre.chunks) == 0

    # all of a group cut ahead: its rows taken, every token counted here
    pre.add(sent, sent_chunks)
    part = contents[[3, 1]]
    c, m, rows = pre.fill(part)
    assert c == [counts[3], counts[1]] and m == [methods[3], methods[1]]
    assert rows.equals(chunks_frame(part, index_terms=True))
    assert pre.cut == {hashes[4]}
    pre.forget([hashes[4]])
    assert not pre.cut and sum(x.height for x in pre.chunks) == 0


@pytest.mark.parametrize("mode", ["never", "always", "auto", "chunks"])
def test_a_reader_process_that_leaves_tokens_and_chunks_to_the_ingest_stores_the_same(
    tmp_path, monkeypatch, mode
):
    ctx = _corpus_ctx()
    seq = _ingest(tmp_path / "seq", ctx, writer=False)
    monkeypatch.setattr(pipeline, "PROCESS_READ_BYTES", 0)  # read in a reader process
    monkeypatch.setenv("CTXKEEP_READER_PRECOMPUTE", mode)  # the process reads it at its start
    par = _ingest(tmp_path / "par", ctx, writer=True)
    assert par == seq
    assert _fingerprint(tmp_path / "par") == _fingerprint(tmp_path / "seq")


def _index_terms(home: Path) -> tuple:
    """The vocabulary by term id and the symbol index (every ``fts_symbols`` instance)."""
    from conftest import chunk_fts_index

    conn = sqlite3.connect(home / "store.db")
    try:
        return (
            conn.execute("SELECT term_id, term FROM vocab ORDER BY term_id").fetchall(),
            chunk_fts_index(conn)["fts_symbols"],
        )
    finally:
        conn.close()


def test_index_terms_a_reader_process_computes_store_what_the_ingest_computes(tmp_path, monkeypatch):
    """The reader sends each chunk's symbol terms and vocabulary
    (``chunks_frame(index_terms=True)``) and the ingest process takes the union of a
    group's: the vocabulary (the same term ids: each group adds the same terms) and the
    symbol index are what the ingest computing them itself stores; and the reader did
    send them (a spy on ``with_index_terms`` sees the column)."""
    from ctxkeep.sinks.sqlite import load

    ctx = _corpus_ctx()
    seq = _ingest(tmp_path / "seq", ctx, writer=False)
    monkeypatch.setattr(pipeline, "PROCESS_READ_BYTES", 0)  # read in a reader process
    monkeypatch.setenv("CTXKEEP_READER_PRECOMPUTE", "always")
    sent = []
    real = load.with_index_terms

    def spy(frames):
        c = frames.get("chunks")
        if c is not None and c.height:
            sent.append("vocab" in c.columns)
        return real(frames)

    monkeypatch.setattr(sqlite_store, "with_index_terms", spy)
    par = _ingest(tmp_path / "par", ctx, writer=True)
    assert par == seq
    assert sent and all(sent)
    vocab, syms = _index_terms(tmp_path / "par")
    assert len(vocab) > 1000 and len(syms) > 100
    assert (vocab, syms) == _index_terms(tmp_path / "seq")
    assert _fingerprint(tmp_path / "par") == _fingerprint(tmp_path / "seq")


def test_the_reader_process_counts_ahead_only_while_the_ingest_is_behind():
    # the chunk before took 0.4 s to make; sending it blocked 0.02 s: the ingest keeps up
    assert not read_worker.precompute_now(0.02, 0.4)
    assert read_worker.precompute_now(0.2, 0.4)  # blocked half as long: the ingest is behind
    assert not read_worker.precompute_now(0.0, 0.0)  # the first chunk: the ingest is idle
    assert read_worker.precompute_now(0.0, 0.4, "always")
    assert not read_worker.precompute_now(5.0, 0.4, "never")


def test_a_reader_process_ingest_over_a_store_that_holds_some_contents(tmp_path, monkeypatch):
    ctx, text = _two_files_sharing_a_text(tmp_path)
    proj = tmp_path / "home" / ".claude" / "projects" / "-tmp-overlap"
    b = (proj / "b.jsonl").read_bytes()
    results = {}
    for mode in ("thread", "process"):
        (proj / "b.jsonl").unlink()
        home = tmp_path / mode
        first = _ingest(home, ctx, writer=True)
        (proj / "b.jsonl").write_bytes(b)  # the shared text is stored already
        if mode == "process":
            monkeypatch.setattr(pipeline, "PROCESS_READ_BYTES", 0)
        second = _ingest(home, ctx, writer=True)
        results[mode] = (first["entries_new"], second["entries_new"], _fingerprint(home))
    assert results["process"] == results["thread"]
    assert results["thread"][:2] == (2, 2)
    assert results["thread"][2]["chunks"][0] == 5 + 2


def test_a_reader_process_that_cannot_start_falls_back_to_reading_here(tmp_path, monkeypatch):
    ctx = _corpus_ctx()
    conn = sqlite_store.connect(tmp_path)
    try:
        todo = plan(tmp_path, conn, ctx=ctx).todo[:3]
    finally:
        conn.close()
    real_popen = read_worker.subprocess.Popen

    def broken(args, **kw):  # a Python that cannot import ctxkeep
        return real_popen([args[0], "-c", "import sys; sys.exit('no module named ctxkeep (test)')"], **kw)

    monkeypatch.setattr(read_worker.subprocess, "Popen", broken)
    got = list(read_worker.read_in_process(todo))
    want = list(read_files(todo))
    assert [(i.file, i.read, None if i.batch is None else len(i.batch.entries)) for i in got] == [
        (i.file, i.read, None if i.batch is None else len(i.batch.entries)) for i in want
    ]
    assert all(i.rows is None for i in got)  # the plain shape: entries as dicts
    assert sum(len(i.batch.entries) for i in got if i.batch is not None) > 0


def test_output_on_the_reader_processs_stdout_does_not_break_the_protocol(tmp_path, monkeypatch, capfd):
    """Whatever writes to the reader process's stdout (a library, a profiler: ``py-spy
    --subprocesses`` once made the ingest fail with ``UnpicklingError: invalid load key
    '['``) goes to the ingest's stderr; the items come through their own pipe."""
    ctx = _corpus_ctx()
    conn = sqlite_store.connect(tmp_path / "store")
    try:
        todo = plan(tmp_path / "store", conn, ctx=ctx).todo[:3]
    finally:
        conn.close()
    site = tmp_path / "site"
    site.mkdir()  # imported at the reader process's start, before any ctxkeep code
    (site / "sitecustomize.py").write_text("import os\nos.write(1, b'[stray output on fd 1]\\n')\n")
    monkeypatch.setenv("PYTHONPATH", str(site))
    got = list(read_worker.read_in_process(todo))
    want = list(read_files(todo))
    assert [(i.file, i.read, i.entries) for i in got] == [(i.file, i.read, i.entries) for i in want]
    assert all(i.rows is not None for i in got if i.batch is not None)  # read in the process
    cap = capfd.readouterr()
    assert "[stray output on fd 1]" in cap.err and "[stray output" not in cap.out


def test_in_flight_forgets_the_generations_of_committed_groups():
    committed = [0]
    seen = transform.InFlight(lambda: committed[0])
    seen.add(["e1", "e2"], {"h1": 10})
    seen.add(["e3"], {"h2": 20, "h3": 30})
    seen.add([], {})
    seen.add(["e4"], {"h4": 40})
    seen.prune()  # nothing committed yet: all kept
    assert seen.entries == {"e1", "e2", "e3", "e4"} and set(seen.contents) == {"h1", "h2", "h3", "h4"}
    committed[0] = 2
    seen.prune()
    assert seen.entries == {"e4"} and seen.contents == {"h4": 40} and seen.pruned == 2
    committed[0] = 3  # the empty group
    seen.prune()
    assert seen.entries == {"e4"} and seen.pruned == 3
    plain = transform.InFlight()  # no writer: everything is kept
    plain.add(["e1"], {"h1": 1})
    plain.prune()
    assert plain.entries == {"e1"} and plain.contents == {"h1": 1}


def test_the_writer_ingest_holds_only_the_groups_not_yet_committed(tmp_path, monkeypatch):
    """With the writer thread, the transform's InFlight holds the groups the writer has
    not committed when it starts (not every entry of the run), and the store is the
    sequential one."""
    ctx = _corpus_ctx()
    sizes, lags = [], []
    real = transform.InFlight.prune

    def prune(self):
        before = self.committed()
        real(self)
        lags.append(self.pruned - before)  # >= 0: every group committed before is forgotten
        sizes.append(len(self.entries))

    monkeypatch.setattr(transform.InFlight, "prune", prune)
    # transactions of ~150 new entries or more (the corpus's 3,890 would fit one of TXN_ROWS)
    monkeypatch.setattr(writer_mod, "TXN_ROWS", 150)
    par = _ingest(tmp_path / "par", ctx, writer=True)
    seq = _ingest(tmp_path / "seq", ctx, writer=False)
    assert par == seq and _fingerprint(tmp_path / "par") == _fingerprint(tmp_path / "seq")
    assert len(sizes) > 10 and min(lags) >= 0
    # at most the groups of the open transaction and those in flight (WRITE_AHEAD + the
    # one loading): far below the 3,890 entries of the run (an InFlight that kept every
    # entry ends near 3,890)
    assert max(sizes) < par["entries_new"] / 2


def test_the_sync_thread_loads_the_prices_before_the_closing_sync(tmp_path):
    """The analytics thread loads genai-prices' tables once its first group is in
    DuckDB, while the ingest goes on: the closing sync (the critical path's last step)
    finds them loaded (issue 26). Without a first group nothing is loaded."""
    import time

    from ctxkeep.transforms import cost

    home = tmp_path / "store"
    sqlite_store.connect(home).close()
    cost._load_genai.cache_clear()
    syncer = AnalyticsSyncer(home)
    assert syncer.finish() == "" and cost._load_genai.cache_info().currsize == 0
    syncer.on_commit(0)  # a group with nothing new: synced from SQLite
    deadline = time.monotonic() + 60
    while cost._load_genai.cache_info().currsize == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert cost._load_genai.cache_info().currsize == 1  # before finish() was asked
    assert syncer.finish() == "analytics: 0 entries synced"


def test_a_reader_process_redacts_no_raw_line_while_the_vault_is_suspended(tmp_path):
    """A reparse suspends the vault (it reads the vault's own redacted bytes): its
    reader process did not know and redacted every raw line again (``rekey``); now the
    ingest's vault state goes with it."""
    from ctxkeep.sinks import vault

    ctx = _corpus_ctx()
    conn = sqlite_store.connect(tmp_path)
    try:
        todo = [t for t in plan(tmp_path, conn, ctx=ctx).todo if t[0].mode == "append"][:3]
    finally:
        conn.close()
    on = [i.batch.raw for i in read_worker.read_in_process(todo) if i.batch is not None]
    with vault.suspended():
        off = [i.batch.raw for i in read_worker.read_in_process(todo) if i.batch is not None]
    assert on and all(r is not None and r.redacted is not None for r in on)
    assert len(off) == len(on) and all(r is not None and r.redacted is None for r in off)
    assert [r.data for r in off] == [r.data for r in on]


def test_two_reader_processes_store_what_one_reader_stores(tmp_path, monkeypatch):
    """The files shared between two reader processes (``read_split``), taken back in
    ``todo`` order: the same groups, entry ids (rowids too), dedup and watermarks."""
    ctx = _corpus_ctx()
    monkeypatch.setattr(pipeline, "PROCESS_READ_BYTES", 0)
    monkeypatch.setattr(pipeline, "SPLIT_READ_BYTES", 1 << 40)  # one reader process
    one = _ingest(tmp_path / "one", ctx, writer=True)
    monkeypatch.setattr(pipeline, "SPLIT_READ_BYTES", 0)
    monkeypatch.setattr(read_worker, "READERS", 2)
    monkeypatch.setattr(read_worker, "SPLIT_BLOCK_BYTES", 256 * 1024)  # many blocks of the corpus
    monkeypatch.delenv("CTXKEEP_READER_PRECOMPUTE", raising=False)
    started, modes, counted = [], [], []
    real = read_worker.read_in_process

    def spy(todo, **kw):
        started.append([str(f.path) for f, _ in todo])
        modes.append(kw.get("precompute"))
        return real(todo, **kw)

    real_count = transform.estimate_tokens

    def count(texts):
        counted.append(len(texts))
        return real_count(texts)

    monkeypatch.setattr(read_worker, "read_in_process", spy)
    monkeypatch.setattr(transform, "estimate_tokens", count)
    two = _ingest(tmp_path / "two", ctx, writer=True)
    assert len(started) == 2 and started[0] and started[1]
    # the readers count every new content's tokens: the ingest process counts none
    assert modes == ["split", "split"] and counted == []
    assert sorted(started[0] + started[1]) == sorted({p for s in started for p in s})  # each file once
    assert two == one and two["files_read"] == 28
    assert _fingerprint(tmp_path / "two") == _fingerprint(tmp_path / "one")
    rowids = "SELECT rowid, entry_id FROM entries ORDER BY rowid"
    for home in ("one", "two"):
        c = sqlite3.connect(f"file:{tmp_path / home / 'store.db'}?mode=ro", uri=True)
        try:
            got = c.execute(rowids).fetchall()
        finally:
            c.close()
        if home == "one":
            want = got
    assert got == want and len(got) == 3890


def test_a_reader_sharing_the_files_counts_tokens_ahead_except_in_a_big_file(tmp_path, monkeypatch):
    from ctxkeep.sources.contract import SourceFile

    small, big = tmp_path / "small.jsonl", tmp_path / "big.jsonl"
    small.write_bytes(b"x" * 10)
    big.write_bytes(b"x" * 100)
    monkeypatch.setattr(read_worker, "SPLIT_BIG_FILE", 100)
    items = [ReadItem(SourceFile("claude", small)), ReadItem(SourceFile("claude", tmp_path / "gone"))]
    assert read_worker.chunk_mode(items, "split") == "always"
    assert read_worker.chunk_mode([*items, ReadItem(SourceFile("claude", big))], "split") == "auto"
    assert read_worker.chunk_mode(items, "never") == "never"


def test_split_blocks_alternate_whole_files(tmp_path):
    from ctxkeep.sources.contract import SourceFile

    sizes = [5, 1, 1, 9, 2, 2, 2, 0]
    todo = []
    for i, n in enumerate(sizes):
        p = tmp_path / f"f{i}.jsonl"
        p.write_bytes(b"x" * n)
        todo.append((SourceFile("claude", p, "append", {}), None))
    todo.append((SourceFile("claude", tmp_path / "gone.jsonl", "append", {}), None))
    # blocks of >= 4 bytes: [5] [1 1 9] [2 2] [2 0 gone]
    assert read_worker.split_blocks(todo, 2, 4) == [(0, 1), (1, 3), (0, 2), (1, 3)]
    assert read_worker.split_blocks(todo, 1, 4) == [(0, 1), (0, 3), (0, 2), (0, 3)]
    assert sum(n for _, n in read_worker.split_blocks(todo, 3, 100)) == len(todo)


def test_read_split_raises_a_readers_error_at_its_block_and_stops_both(tmp_path, monkeypatch):
    """Files f0..f3 in blocks of one file, readers 0 1 0 1: reader 0 fails in f2, so the
    items come f0, f1 (reader 1's), then the error; reader 1's f3 is never taken, and
    both read-ahead threads are stopped."""
    from ctxkeep.sources.contract import SourceFile

    todo = []
    for i in range(4):
        p = tmp_path / f"f{i}.jsonl"
        p.write_bytes(b"x" * 10)
        todo.append((SourceFile("claude", p, "append", {}), None))
    shares = []

    def fake(share, **kw):
        shares.append([f.path.name for f, _ in share])
        for f, _ in share:
            if f.path.name == "f2.jsonl":
                raise ValueError("bad f2")
            yield ReadItem(f, None, True)

    monkeypatch.setattr(read_worker, "read_in_process", fake)
    got = []
    items = read_worker.read_split(todo, readers=2, block_bytes=10)
    with pytest.raises(ValueError, match="bad f2"):
        for item in items:
            got.append(item.file.path.name)
    assert got == ["f0.jsonl", "f1.jsonl"]
    assert sorted(shares) == [["f0.jsonl", "f2.jsonl"], ["f1.jsonl", "f3.jsonl"]]
    assert not any(t.name == "ctxkeep-read-ahead" and t.is_alive() for t in threading.enumerate())
    # closed before its first item: every reader stops all the same
    items = read_worker.read_split(todo, readers=2, block_bytes=10)
    items.close()
    assert not any(t.name == "ctxkeep-read-ahead" and t.is_alive() for t in threading.enumerate())
    # one reader (or one block): the plain read-ahead of one reader process
    one = read_worker.read_split(todo, readers=1, block_bytes=10)
    one.close()
    assert isinstance(one, ReadAhead) and shares[-1][:1] == ["f0.jsonl"]


@pytest.mark.parametrize("nice", ["0", "3"])
def test_a_reader_process_runs_at_the_niceness_asked_for(tmp_path, monkeypatch, nice):
    """``CTXKEEP_READER_NICE``: the reader process lowers its own priority by that much
    (0, the default: as the ingest), and still yields what the reader thread yields."""
    ctx = _corpus_ctx()
    conn = sqlite_store.connect(tmp_path / "store")
    try:
        todo = plan(tmp_path / "store", conn, ctx=ctx).todo
    finally:
        conn.close()
    monkeypatch.setenv("CTXKEEP_READER_NICE", nice)
    procs = []
    real = read_worker.start_child

    def spy(module, *args):
        proc, out = real(module, *args)
        procs.append(proc)
        return proc, out

    monkeypatch.setattr(read_worker, "start_child", spy)
    seen = None
    n = 0
    for _item in read_worker.read_in_process(todo):
        n += 1
        if seen is None:  # the process is running: its niceness (field 19 of stat)
            stat = Path(f"/proc/{procs[0].pid}/stat").read_text().rsplit(")", 1)[1].split()
            seen = int(stat[16]) - os.getpriority(os.PRIO_PROCESS, 0)
    assert seen == int(nice)
    assert n == sum(1 for _ in read_files(todo))
