"""The one run loop over parts: a plan's files cut into parts (one agent's files, in
plan order), and parts extracted + transformed apart (as Prefect tasks are, here on
a thread pool or eagerly) store what the in-process stream stores."""

from __future__ import annotations

import hashlib
import sqlite3
from concurrent.futures import Future, ThreadPoolExecutor

import pytest
from test_ingest_overlap import _two_files_sharing_a_text

from conftest import CORPUS_HOME
from ctxkeep.pipeline import engine
from ctxkeep.pipeline import plan as plan_mod
from ctxkeep.pipeline.plan import Part, pending_bytes, plan, split_parts
from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sources.contract import DiscoveryContext
from ctxkeep.transforms.chunk import chunk_text
from store_digest import store_digest


def _corpus_ctx() -> DiscoveryContext:
    if not CORPUS_HOME.is_dir():
        pytest.skip("shared/corpus not present")
    return DiscoveryContext(home=CORPUS_HOME, env={})


def test_parts_follow_the_plan_order_and_cut_at_agents_and_bytes(tmp_path):
    conn = sqlite_store.connect(tmp_path)
    try:
        todo = plan(tmp_path, conn, ctx=_corpus_ctx()).todo
    finally:
        conn.close()
    parts = split_parts(todo)
    assert [t for p in parts for t in p.todo] == todo
    assert all(len({f.agent for f, _ in p.todo}) == 1 and p.agent == p.todo[0][0].agent for p in parts)
    # the corpus is small: one part per agent, agents in plan order, none twice
    agents = list(dict.fromkeys(f.agent for f, _ in todo))
    assert [p.agent for p in parts] == agents and len(agents) >= 5
    assert [p.name for p in parts] == agents
    # with a tiny budget every file is a part of its own, numbered per agent
    one = split_parts(todo, part_bytes=1)
    assert [p.todo for p in one] == [[t] for t in todo]
    codex = [p for p in one if p.agent == "codex"]
    assert [p.index for p in codex] == list(range(len(codex))) and len(codex) > 1
    assert codex[1].name == "codex-1"
    # a budget cuts before the file that would pass it
    sizes = [pending_bytes([t]) for t in todo if t[0].agent == "codex"]
    mid = split_parts([t for t in todo if t[0].agent == "codex"], part_bytes=sizes[0] + sizes[1])
    assert [len(p.todo) for p in mid][0] == 2


def _ingest(home, ctx, submit=None) -> dict:
    conn = sqlite_store.connect(home)
    try:
        p = plan(home, conn, ctx=ctx)
        return engine.ingest_files(conn, p.todo, sqlite_store.tombstoned(conn), submit=submit)
    finally:
        conn.close()


@pytest.mark.parametrize("part_bytes", [plan_mod.PART_BYTES, 1])
def test_parts_transformed_on_a_thread_pool_store_what_the_stream_stores(tmp_path, monkeypatch, part_bytes):
    ctx = _corpus_ctx()
    monkeypatch.setattr(plan_mod, "PART_BYTES", part_bytes)
    # the stream grouped as the parts are (one group per part at least, however small):
    # a content met in two groups takes its chunk title's tool name from the first group
    # holding an entry of it with one (``load._tool_names``)
    monkeypatch.setattr(engine, "PART_GROUP_BYTES", 0)
    seq = _ingest(tmp_path / "seq", ctx)
    calls = []
    with ThreadPoolExecutor(2) as pool:

        def submit(part: Part, tombs: dict):
            calls.append(part.name)
            return pool.submit(engine.extract_transform_part, tmp_path / "par", part, tombs)

        par = _ingest(tmp_path / "par", ctx, submit)
    assert par == seq
    # 27 session files and a sub-agent's .meta.json (a sidecar: bytes, no record)
    assert (seq["entries_new"], seq["files_read"], seq["lines"]) == (3890, 28, 3665)
    assert len(calls) == len(split_parts(_plan_todo(tmp_path / "fresh", ctx)))
    assert store_digest(tmp_path / "par") == store_digest(tmp_path / "seq")


def _plan_todo(home, ctx):
    conn = sqlite_store.connect(home)
    try:
        return plan(home, conn, ctx=ctx).todo
    finally:
        conn.close()


def test_a_content_new_in_two_parts_transformed_apart_is_stored_once(tmp_path, monkeypatch):
    """Both parts are transformed before either is stored (an eager submit): each finds
    the shared text new; the writer stores it, its chunks and FTS rows once."""
    ctx, text = _two_files_sharing_a_text(tmp_path)
    h = hashlib.sha256(text.encode()).hexdigest()
    monkeypatch.setattr(plan_mod, "PART_BYTES", 1)  # a part per file
    store = tmp_path / "store"
    fresh = []

    def eager(part: Part, tombs: dict) -> Future:
        groups = engine.extract_transform_part(store, part, tombs)
        fresh.append([g.frames["contents"]["content_hash"].to_list().count(h) for g in groups])
        f = Future()
        f.set_result(groups)
        return f

    r = _ingest(store, ctx, eager)
    assert fresh == [[1], [1]]  # each part alone would store the text
    assert r["entries_new"] == 4 and r["files_read"] == 2
    conn = sqlite3.connect(store / "store.db")
    try:
        assert conn.execute("SELECT count(*) FROM contents WHERE content_hash = ?", (h,)).fetchone()[0] == 1
        assert (
            conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
            == conn.execute("SELECT count(*) FROM fts_words").fetchone()[0]
            == len(chunk_text(text)) + 2
            == 7
        )
        toks = conn.execute("SELECT token_estimate FROM entries WHERE content_hash = ?", (h,)).fetchall()
        assert len(toks) == 2 and toks[0] == toks[1] and toks[0][0] > 1000
    finally:
        conn.close()
    # the same files through the in-process stream: the same store
    _ingest(tmp_path / "stream", ctx)
    assert store_digest(store) == store_digest(tmp_path / "stream")


def test_a_failed_part_fails_the_run_and_stores_nothing_after_it(tmp_path, monkeypatch):
    ctx = _corpus_ctx()

    def submit(part: Part, tombs: dict) -> Future:
        f = Future()
        if part.agent == "codex":
            f.set_exception(OSError("disk read error (test)"))
        else:
            f.set_result(engine.extract_transform_part(tmp_path / "store", part, tombs))
        return f

    order = [p.agent for p in split_parts(_plan_todo(tmp_path / "fresh", ctx))]
    with pytest.raises(OSError, match="disk read error"):
        engine.run_ingest(tmp_path / "store", ctx=ctx, submit=submit)
    conn = sqlite3.connect(tmp_path / "store" / "store.db")
    try:
        stored = {r[0] for r in conn.execute("SELECT DISTINCT agent FROM entries")}
        run = conn.execute("SELECT flow, status FROM runs").fetchall()
    finally:
        conn.close()
    i = order.index("codex")
    assert stored and stored <= set(order[:i]) and not stored & set(order[i:])
    assert run == [("ingest", "failed")]


def test_run_ingest_reads_exactly_the_files_given_and_records_the_flow(tmp_path):
    """Backfill's call: its selection as ``files``, watermarks ignored, its own run name."""
    ctx = _corpus_ctx()
    todo = _plan_todo(tmp_path / "fresh", ctx)
    codex = [f for f, _ in todo if f.agent == "codex"][:2]
    first = engine.run_ingest(tmp_path / "store", ctx=ctx)
    again = engine.run_ingest(tmp_path / "store", files=codex, force=True, flow="backfill")
    assert (again.files, again.files_read, again.entries_new) == (2, 2, 0)
    assert again.bytes == sum(f.path.stat().st_size for f in codex) and again.lines > 0
    assert again.per_agent == {}  # nothing new: every entry is stored already
    conn = sqlite3.connect(tmp_path / "store" / "store.db")
    try:
        runs = conn.execute("SELECT flow, status, entries_new FROM runs ORDER BY run_id").fetchall()
    finally:
        conn.close()
    assert runs == [("ingest", "ok", first.entries_new), ("backfill", "ok", 0)]


def test_parts_keep_only_what_the_parts_in_flight_may_not_have_seen(tmp_path, monkeypatch):
    """``drop_written``'s record forgets the groups committed before a part was
    submitted (that part's transform found them in the store): with a part per file,
    it holds far fewer than the run's entries, and the store is the stream's."""
    from ctxkeep.pipeline import transform
    from ctxkeep.pipeline import writer as writer_mod

    ctx = _corpus_ctx()
    monkeypatch.setattr(plan_mod, "PART_BYTES", 1)
    monkeypatch.setattr(engine, "PART_GROUP_BYTES", 0)  # the stream grouped as the parts (above)
    # transactions of ~150 new entries or more (the corpus's 3,890 would fit one of TXN_ROWS)
    monkeypatch.setattr(writer_mod, "TXN_ROWS", 150)
    sizes = []
    real = transform.InFlight.prune

    def prune(self):
        real(self)
        if self.committed is not None:  # the writer side's record, not a part's own
            sizes.append(len(self.entries))

    monkeypatch.setattr(transform.InFlight, "prune", prune)
    with ThreadPoolExecutor(2) as pool:
        par = _ingest(
            tmp_path / "par",
            ctx,
            lambda part, tombs: pool.submit(engine.extract_transform_part, tmp_path / "par", part, tombs),
        )
    taken = list(sizes)
    seq = _ingest(tmp_path / "seq", ctx)
    assert par == seq and store_digest(tmp_path / "par") == store_digest(tmp_path / "seq")
    # one record per part, taken before its groups are added: a record of every entry
    # would end near the run's 3,890 (all but the last part's); this one holds the
    # groups of the parts submitted before those earlier groups were committed
    assert len(taken) == len(split_parts(_plan_todo(tmp_path / "fresh", ctx))) > 10
    assert max(taken) < par["entries_new"] * 0.6 and taken[-1] < par["entries_new"] / 4


def test_a_part_over_the_stream_cap_is_streamed_one_group_at_a_time(tmp_path, monkeypatch):
    """Issue 26, target 2: a submitted part's groups are held whole until the writer
    takes them, so one big session file (2 GB in the bench) would be held whole.
    A part over ``STREAM_PART_BYTES`` is streamed instead: here a Claude Code file read
    in 8 KiB batches, one group each, is never more than a few groups ahead of the
    writer, is not submitted, and the store is the in-process stream's."""
    import functools
    import shutil

    from ctxkeep.pipeline import writer as writer_mod
    from ctxkeep.sources import claude_code

    src = max(
        (CORPUS_HOME / ".claude" / "projects").rglob("*.jsonl") if CORPUS_HOME.is_dir() else [],
        key=lambda p: p.stat().st_size,
        default=None,
    )
    if src is None:
        pytest.skip("shared/corpus not present")
    home = tmp_path / "home"
    big = home / ".claude" / "projects" / "-big" / src.name
    big.parent.mkdir(parents=True)
    shutil.copyfile(src, big)
    small = sorted((CORPUS_HOME / ".codex").rglob("rollout-*.jsonl"), key=lambda p: (p.stat().st_size, p))
    for p in [p for p in small if p.stat().st_size > 1000][:3]:  # small parts, submitted
        d = home / p.relative_to(CORPUS_HOME)
        d.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(p, d)
    ctx = DiscoveryContext(home=home, env={})
    monkeypatch.setattr(claude_code, "read", functools.partial(claude_code.read, batch_bytes=8 * 1024))
    monkeypatch.setattr(plan_mod, "PART_BYTES", 1)  # a part per file
    monkeypatch.setattr(engine, "STREAM_PART_BYTES", big.stat().st_size - 1)  # the big file's part only
    # a transaction a group (else the groups of the writer's open transaction add to the lag)
    monkeypatch.setattr(writer_mod, "TXN_ROWS", 1)
    stored, lag, streamed = [0], [], [0]
    real = engine.extract_transform

    def spy(conn, parts, *a, **kw):
        for g in real(conn, parts, *a, **kw):
            if parts[0].todo[0][0].path == big:
                streamed[0] += 1
                lag.append(streamed[0] - stored[0])
            yield g

    monkeypatch.setattr(engine, "extract_transform", spy)
    calls = []
    with ThreadPoolExecutor(2) as pool:

        def submit(part: Part, tombs: dict):
            calls.append(part.todo[0][0].path)
            return pool.submit(engine.extract_transform_part, tmp_path / "par", part, tombs)

        conn = sqlite_store.connect(tmp_path / "par")
        try:
            todo = plan(tmp_path / "par", conn, ctx=ctx).todo
            par = engine.ingest_files(
                conn,
                todo,
                sqlite_store.tombstoned(conn),
                group_bytes=1,
                submit=submit,
                on_bytes=lambda n: stored.__setitem__(0, stored[0] + 1),
            )
        finally:
            conn.close()
    assert big not in calls and len(calls) == 3
    assert streamed[0] >= 6  # the file came as many groups ...
    assert max(lag) <= writer_mod.WRITE_AHEAD + 3  # ... each a few groups ahead of the writer at most
    monkeypatch.setattr(engine, "extract_transform", real)
    seq = _ingest(tmp_path / "seq", ctx)
    assert par == seq and par["files_read"] == 4
    assert store_digest(tmp_path / "par") == store_digest(tmp_path / "seq")
