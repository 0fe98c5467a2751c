"""The ingest's side process (``pipeline.side_process``) counts tokens and prices
responses exactly as the ingest process would, is really used (an ingest with this
process's own counting and pricing broken still stores the same), and a side process
that dies leaves the work to this process with the same results."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import duckdb
import pytest

from conftest import CORPUS_HOME
from ctxkeep.pipeline import engine as pipeline
from ctxkeep.pipeline import side_process
from ctxkeep.sinks import duckdb as duckdb_store
from ctxkeep.sources.contract import DiscoveryContext
from ctxkeep.transforms import cost, tokens
from store_digest import store_digest

CLAUDE = ".claude/projects/-Users-chip-dev-ai-music/d3ad4cdc-5657-435d-98fa-0035d53e383d.jsonl"


def _texts() -> list[str]:
    """Texts of every kind the BPE meets: the string fields of a real transcript (short
    and long, so both whole and sampled counts), CJK, emoji, the empty string."""
    path = CORPUS_HOME / CLAUDE
    if not path.is_file():
        pytest.skip("shared/corpus not present")
    out: list[str] = []

    def walk(v):
        if isinstance(v, str):
            out.append(v)
        elif isinstance(v, dict):
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)

    for ln in path.read_text(encoding="utf-8").splitlines():
        walk(json.loads(ln))
    long = "\n".join(out)
    return [*out, long, "日本語のテキストと한국어 文字 🙂", ""]


def test_the_side_process_counts_and_prices_what_this_process_computes():
    texts = _texts()
    assert any(len(t) > tokens.BPE_FULL_CHARS for t in texts)  # the sampled estimate too
    day = dt.date(2025, 10, 1)
    keys = [
        ("claude-sonnet-4-5", day),  # tiered in genai-prices 0.2.3 (by the request's input)
        ("claude-sonnet-4-20250514", day),
        ("gpt-5-codex", day),
        ("gemini-2.5-pro", day),
        ("no-such-model-xyz", day),
    ]
    items = [
        ("claude-sonnet-4-5", day, 250_000, 10_000, 2_000, 500, 3_000),
        ("gemini-2.5-pro", day, 10, 0, 0, 0, 5),
    ]
    side = side_process.SideProcess()
    try:
        got = side.count(texts)
        rates = side.rates(keys)
        tiered = side.tiered(items)
    finally:
        side.close()
    want = tokens.count_here(texts)
    assert got == want
    assert set(got[1]) == {"o200k_base", "o200k_base-sampled"}
    assert rates == [cost.genai_rates(m, d) for m, d in keys]
    assert rates[0] == "tiered" and rates[-1] is None and isinstance(rates[1], tuple)
    assert tiered == [cost.genai_tiered(*i) for i in items]
    assert tiered[0] > 0


def _usage(home: Path) -> list:
    con = duckdb.connect(str(home / duckdb_store.DB_NAME), read_only=True)
    try:
        return con.execute("SELECT * EXCLUDE (machine) FROM usage ORDER BY usage_key").fetchall()
    finally:
        con.close()


def _reference(tmp_path: Path):
    """A corpus ingest without a side process (DuckDB appended from a thread here)."""
    if not CORPUS_HOME.is_dir():
        pytest.skip("shared/corpus not present")
    ctx = DiscoveryContext(home=CORPUS_HOME, env={})
    ref = tmp_path / "ref"
    return ctx, ref, pipeline.run_ingest(ref, ctx=ctx)


def _beside_side_process(tmp_path: Path, ctx, s_ref):
    """A corpus ingest into ``tmp_path/side`` beside a side process: (home, summary),
    its analytics line checked against the reference's."""
    home = tmp_path / "side"
    with side_process.started() as side:
        assert side is not None
        s = pipeline.run_ingest(home, ctx=ctx)
    assert s.analytics == s_ref.analytics == f"analytics: {s.entries_new} entries synced"
    return home, s


def test_an_ingest_counts_and_prices_in_the_side_process(tmp_path, monkeypatch):
    ctx, ref, s_ref = _reference(tmp_path)

    def broken(*a, **k):
        raise AssertionError("counted or priced in the ingest process")

    # this process can neither count nor price: whatever the store holds came from
    # the side process
    monkeypatch.setattr(tokens, "count_here", broken)
    monkeypatch.setattr(cost, "genai_rates", broken)
    monkeypatch.setattr(cost, "genai_tiered", broken)
    home, _ = _beside_side_process(tmp_path, ctx, s_ref)
    assert store_digest(home) == store_digest(ref)
    got, want = _usage(home), _usage(ref)
    assert len(got) == len(want) > 0
    assert got == want


def test_a_side_process_that_dies_leaves_the_work_to_this_process():
    texts = _texts()[:200]
    day = dt.date(2025, 10, 1)
    with side_process.started() as side:
        side._proc.kill()
        side._proc.wait()
        with pytest.raises(RuntimeError):
            side.count(["x"])
        assert tokens.estimate_tokens(texts) == tokens.count_here(texts)
        p = cost.Pricer()
        assert p.rates_many([("claude-sonnet-4-20250514", day)]) == [
            cost.genai_rates("claude-sonnet-4-20250514", day)
        ]
        item = ("claude-sonnet-4-5", day, 300_000, 5, 0, 0, 10)
        assert cost.genai_tiered_of([item]) == [cost.genai_tiered(*item)]


def test_turned_off_it_starts_nothing(monkeypatch):
    monkeypatch.setattr(side_process, "ENABLED", False)
    with side_process.started() as side:
        assert side is None
        assert tokens._counter is None and cost._remote is None


def _analytics(home: Path) -> dict:
    """Every DuckDB table's rows (sorted; ``machine`` and the views' SQL digest aside)."""
    con = duckdb.connect(str(home / duckdb_store.DB_NAME), read_only=True)
    try:
        tables = [
            t
            for (t,) in con.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_type = 'BASE TABLE'"
            ).fetchall()
        ]
        out = {}
        for t in tables:
            cols = [
                c
                for (c,) in con.execute(
                    "SELECT column_name FROM information_schema.columns WHERE table_name = ?", [t]
                ).fetchall()
                if c != "machine"
            ]
            where = " WHERE key <> 'model_sql'" if t == "meta" else ""
            out[t] = con.execute(f"SELECT {', '.join(cols)} FROM {t}{where} ORDER BY ALL").fetchall()
        return out
    finally:
        con.close()


def _behind(home: Path) -> bool:
    from ctxkeep.sinks import sqlite as sqlite_store

    conn = sqlite_store.connect(home, readonly=True)
    try:
        return sqlite_store.analytics_behind(conn)
    finally:
        conn.close()


def test_a_small_ingest_syncs_duckdb_in_the_side_process(tmp_path, monkeypatch):
    ctx, ref, s_ref = _reference(tmp_path)
    assert s_ref.bytes <= side_process.SIDE_SYNC_MAX_BYTES  # a small ingest

    def broken(*a, **k):
        raise AssertionError("DuckDB synced in the ingest process")

    # this process cannot write DuckDB: whatever analytics.duckdb holds came from the
    # side process (a local fallback would fail and say so in the note)
    monkeypatch.setattr(duckdb_store, "sync", broken)
    monkeypatch.setattr(duckdb_store, "append_entries", broken)
    monkeypatch.setattr(duckdb_store, "connect", broken)
    syncers = []
    chosen = pipeline._syncer
    monkeypatch.setattr(pipeline, "_syncer", lambda *a: syncers.append(chosen(*a)) or syncers[-1])
    home, s = _beside_side_process(tmp_path, ctx, s_ref)
    monkeypatch.undo()
    assert store_digest(home) == store_digest(ref)
    got, want = _analytics(home), _analytics(ref)
    assert len(got["entries"]) == s.entries_new > 0 and len(got["usage"]) > 0
    assert got == want
    assert not _behind(home)  # the side process's marks were recorded
    # every entry came to DuckDB from the committed groups' Arrow handed to the side
    # process; its closing sync read none of them back from SQLite
    assert [type(x).__name__ for x in syncers] == ["SideAnalytics"]
    assert syncers[0].appended == s.entries_new


def test_a_side_process_that_dies_before_the_duckdb_sync_leaves_it_to_this_process(tmp_path, monkeypatch):
    from ctxkeep.pipeline import analytics_sync

    ctx, ref, s_ref = _reference(tmp_path)
    opened = analytics_sync.SideAnalytics.on_commit
    killed = []

    def open_then_die(self, *a, **k):
        opened(self, *a, **k)
        if self._side is not None and self._side._proc.poll() is None:
            self._side._proc.kill()  # DuckDB opened there, then the process is gone
            self._side._proc.wait()
            killed.append(True)

    monkeypatch.setattr(analytics_sync.SideAnalytics, "on_commit", open_then_die)
    home = tmp_path / "side"
    with side_process.started() as side:
        assert side is not None
        s = pipeline.run_ingest(home, ctx=ctx)
    assert killed  # the side process's sync was chosen, and it died
    assert s.analytics == s_ref.analytics
    assert store_digest(home) == store_digest(ref)
    assert _analytics(home) == _analytics(ref)
    assert not _behind(home)


def test_a_ctxkeep_package_in_the_working_directory_is_not_what_the_child_imports(tmp_path, monkeypatch):
    """Run from a folder that holds another ``ctxkeep`` package (a checkout of another
    version, or anything a repository puts there), ``python -m`` would import that one
    in the side process: its code ran there, and a mismatched request protocol hung the
    ingest for good. The child is started with ``-P`` and imports this checkout's."""
    fake = tmp_path / "ctxkeep" / "pipeline"
    fake.mkdir(parents=True)
    marker = tmp_path / "ran"
    (tmp_path / "ctxkeep" / "__init__.py").write_text("")
    (fake / "__init__.py").write_text("")
    (fake / "side_process.py").write_text(f"open({str(marker)!r}, 'w').write('x')\n")
    monkeypatch.chdir(tmp_path)
    side = side_process.SideProcess(prices=False)
    try:
        counts, _ = side.count(["hello world"])
    finally:
        side.close()
    assert counts == [tokens.count_here(["hello world"])[0][0]] and counts[0] == 2
    assert not marker.exists()
