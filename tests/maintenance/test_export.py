"""``ctxkeep export parquet DEST`` (maintenance/export.py, sinks/lake.py): the lake
holds exactly the store's rows, a second export writes nothing, a purge reaches the
lake at the next export, files are 0600, a failed write leaves no part file, and bad
input is one line.

The lake is read back with pyarrow's own dataset reader and the store with sqlite3
(read-only), never through the code under test."""

from __future__ import annotations

import os
import shutil
import sqlite3
import stat
from pathlib import Path

import pyarrow.dataset as ds
import pytest
from typer.testing import CliRunner

from cli_helpers import one_error_line
from conftest import CORPUS_HOME, ingest
from ctxkeep.cli import app
from ctxkeep.errors import ConfigError, StoreError, UsageError
from ctxkeep.maintenance import export as engine

runner = CliRunner()


def lake_table(lake: Path, table: str):
    """The lake's rows of ``table`` (pyarrow's Hive dataset reader), as an Arrow table."""
    root = lake / table
    if not root.exists():
        return None
    return ds.dataset(str(root), format="parquet", partitioning="hive").to_table()


def parts(lake: Path) -> dict[str, float]:
    """Every part file of the lake → its mtime (ns)."""
    return {str(p): p.stat().st_mtime_ns for p in lake.rglob("*.parquet")}


def store_rows(home: Path, sql: str):
    conn = sqlite3.connect(f"file:{home / 'store.db'}?mode=ro", uri=True)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def set_machine(home: Path, name: str) -> None:
    (home / "config.toml").write_text(f'machine = "{name}"\n', encoding="utf-8")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A store of the corpus's Claude Code, Codex and Gemini CLI sessions, machine
    ``laptop`` (copied per test)."""
    if not CORPUS_HOME.is_dir():
        pytest.skip("shared/corpus not present")
    home = tmp_path_factory.mktemp("export-src") / "home"
    home.mkdir()
    set_machine(home, "laptop")
    ingest(CORPUS_HOME, home, ["claude-code", "codex", "gemini-cli"])
    return home


@pytest.fixture
def home(built, tmp_path) -> Path:
    dst = tmp_path / "home"
    shutil.copytree(built, dst, ignore=shutil.ignore_patterns("*.lock"))
    return dst


def test_lake_holds_the_stores_rows_partitioned(home, tmp_path):
    lake = tmp_path / "lake"
    rep = engine.export_parquet(home, str(lake))
    assert rep["machine"] == "laptop" and len(rep["machine_id"]) == 32
    # usage: one lake row per SQLite usage row, per agent
    u = lake_table(lake, "usage")
    want = dict(store_rows(home, "SELECT agent, count(*) FROM usage GROUP BY agent"))
    got = {}
    for a in u.column("agent").to_pylist():
        got[a] = got.get(a, 0) + 1
    assert got == want and sum(want.values()) > 500
    assert set(u.column("usage_key").to_pylist()) == {
        r[0] for r in store_rows(home, "SELECT usage_key FROM usage")
    }
    assert set(u.column("machine").to_pylist()) == {"laptop"}
    assert set(u.column("machine_id").to_pylist()) == {rep["machine_id"]}
    # the month partition is the UTC month of ts
    months = {(a, str(t)[:7]) for a, t in store_rows(home, "SELECT agent, ts FROM usage")}
    assert {
        (a, m) for a, m in zip(u.column("agent").to_pylist(), u.column("month").to_pylist(), strict=True)
    } == months
    # entries: every store entry once, without text by default
    e = lake_table(lake, "entries")
    ids = {r[0] for r in store_rows(home, "SELECT entry_id FROM entries")}
    assert sorted(e.column("entry_id").to_pylist()) == sorted(ids)
    assert "text" not in e.column_names
    # sessions: one per (agent, session) with entries; no title without --with-text
    s = lake_table(lake, "sessions")
    sess = set(store_rows(home, "SELECT DISTINCT agent, session_id FROM entries"))
    assert set(zip(s.column("agent").to_pylist(), s.column("session_id").to_pylist(), strict=True)) == sess
    assert set(s.column("title").to_pylist()) == {None}
    # layout: DEST/<table>/machine=laptop/agent=<a>/month=<YYYY-MM>/part-<machine id>-….parquet
    for p in lake.rglob("*.parquet"):
        rel = p.relative_to(lake).parts
        assert rel[0] in engine.TABLES and rel[1] == "machine=laptop"
        assert rel[2].startswith("agent=") and rel[3].startswith("month=") and len(rel) == 5
        assert rel[4].startswith(f"part-{rep['machine_id']}-")


def test_second_export_writes_nothing(home, tmp_path):
    lake = tmp_path / "lake"
    first = engine.export_parquet(home, str(lake))
    assert all(t["rows_written"] > 0 for t in first["tables"].values())
    before = parts(lake)
    again = engine.export_parquet(home, str(lake))
    for t in again["tables"].values():
        assert (
            t["written"] == [] and t["removed"] == [] and t["rows_written"] == 0 and t["files_written"] == 0
        )
    assert parts(lake) == before  # no file rewritten, touched or added


def test_new_data_rewrites_only_its_partitions(built, tmp_path):
    # a store of Claude Code only, then Gemini CLI added: only gemini-cli partitions are written
    home = tmp_path / "h"
    home.mkdir()
    set_machine(home, "laptop")
    ingest(CORPUS_HOME, home, ["claude-code"])
    lake = tmp_path / "lake"
    engine.export_parquet(home, str(lake), tables=("usage",))
    before = parts(lake)
    ingest(CORPUS_HOME, home, ["gemini-cli"])
    rep = engine.export_parquet(home, str(lake), tables=("usage",))
    assert {w["agent"] for w in rep["tables"]["usage"]["written"]} == {"gemini-cli"}
    want = store_rows(home, "SELECT count(*) FROM usage WHERE agent = 'gemini-cli'")[0][0]
    assert rep["tables"]["usage"]["rows_written"] == want > 0
    after = parts(lake)
    assert {p: t for p, t in after.items() if p in before} == before  # Claude Code files untouched


def test_purge_then_export_leaves_no_row_of_the_session(home, tmp_path):
    lake = tmp_path / "lake"
    engine.export_parquet(home, str(lake), tables=engine.TABLES)
    # the d3ad4cdc Claude Code session (62 responses on 2025-06-08)
    sid = "d3ad4cdc-5657-435d-98fa-0035d53e383d"
    assert sid in lake_table(lake, "usage").column("session_id").to_pylist()
    raw_paths = lambda: [p for p in lake_table(lake, "raw").column("path").to_pylist() if sid in p]  # noqa: E731
    assert raw_paths()  # the vault's generation of its file
    r = runner.invoke(app, ["purge", "--session", sid, "--yes", "--home", str(home)])
    assert r.exit_code == 0, r.output
    # the default export (no raw named: what `serve --lake` runs) takes the purged
    # session out of the raw table written before too (newuser15 F11)
    rep = engine.export_parquet(home, str(lake))
    assert rep["tables"]["raw"]["removed"] or rep["tables"]["raw"]["written"]
    assert rep["tables"]["usage"]["removed"] or rep["tables"]["usage"]["written"]
    for table in engine.DEFAULT_TABLES:
        t = lake_table(lake, table)
        assert sid not in t.column("session_id").to_pylist(), table
    assert raw_paths() == []  # purged from the vault, so from the lake's raw too
    # and the rest is still there: the lake's usage equals the store's
    keys = {r[0] for r in store_rows(home, "SELECT usage_key FROM usage")}
    assert sorted(lake_table(lake, "usage").column("usage_key").to_pylist()) == sorted(keys)
    assert lake_table(lake, "entries").num_rows == store_rows(home, "SELECT count(*) FROM entries")[0][0]
    # nothing purged since: a default export leaves raw alone (it is exported when named)
    assert "raw" not in engine.export_parquet(home, str(lake))["tables"]


def test_files_are_0600_and_dirs_0700(home, tmp_path):
    lake = tmp_path / "lake"
    engine.export_parquet(home, str(lake))
    files = list(lake.rglob("*.parquet"))
    assert files
    for p in files:
        assert stat.S_IMODE(p.stat().st_mode) == 0o600, p
    for d in (d for d in lake.rglob("*") if d.is_dir()):
        assert stat.S_IMODE(d.stat().st_mode) == 0o700, d


def test_with_text_exports_the_stored_redacted_text(home, tmp_path):
    lake = tmp_path / "lake"
    engine.export_parquet(home, str(lake), tables=("entries", "sessions"), with_text=True)
    e = lake_table(lake, "entries")
    texts = dict(zip(e.column("entry_id").to_pylist(), e.column("text").to_pylist(), strict=True))
    want: dict[str, list[str]] = {}
    for eid, chunk in store_rows(
        home,
        "SELECT e.entry_id, ch.text FROM entries e JOIN contents c ON c.content_hash = e.content_hash "
        "JOIN chunks ch ON ch.content_id = c.content_id ORDER BY e.entry_id, ch.seq",
    ):
        want.setdefault(eid, []).append(chunk)
    assert len(want) > 1000
    assert {eid: "".join(v) for eid, v in want.items()} == {eid: texts[eid] for eid in want}
    titles = [t for t in lake_table(lake, "sessions").column("title").to_pylist() if t]
    assert titles  # first prompts come along with --with-text
    # switching back to no text rewrites the entries without it
    rep = engine.export_parquet(home, str(lake), tables=("entries",))
    assert rep["tables"]["entries"]["rows_written"] == e.num_rows
    assert "text" not in lake_table(lake, "entries").column_names


def test_a_failed_write_leaves_no_part_file(home, tmp_path, monkeypatch):
    lake = tmp_path / "lake"
    real = ds.write_dataset

    def half(*a, **kw):  # the files land in staging, then the write fails
        real(*a, **kw)
        raise OSError("disk full")

    monkeypatch.setattr(ds, "write_dataset", half)
    with pytest.raises(OSError, match="disk full"):
        engine.export_parquet(home, str(lake), tables=("usage",))
    assert list(lake.rglob("*.parquet")) == []
    assert [p.name for p in (lake / "usage").iterdir()] == []  # staging removed
    monkeypatch.setattr(ds, "write_dataset", real)
    rep = engine.export_parquet(home, str(lake), tables=("usage",))
    assert lake_table(lake, "usage").num_rows == rep["tables"]["usage"]["rows_written"] > 0


def test_a_run_stopped_after_some_files_is_completed_by_the_next(home, tmp_path):
    lake = tmp_path / "lake"
    engine.export_parquet(home, str(lake), tables=("usage",))
    # new prices: every usage row is re-priced, so every partition must be rewritten
    (home / "prices.toml").write_text(
        '[models."claude-sonnet-4-20250514"]\ninput_mtok = 1\noutput_mtok = 2\n'
    )
    landed = []

    def stop(path):
        landed.append(path)
        if len(landed) == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        engine.export_parquet(home, str(lake), tables=("usage",), on_file=stop)
    # some partitions now hold both the old and the new file; the next export fixes them
    engine.export_parquet(home, str(lake), tables=("usage",))
    u = lake_table(lake, "usage")
    keys = u.column("usage_key").to_pylist()
    assert len(keys) == len(set(keys)) == store_rows(home, "SELECT count(*) FROM usage")[0][0]
    assert not [p for p in (lake / "usage").iterdir() if p.name.startswith("_staging")]


def test_staging_left_by_a_killed_run_is_removed(home, tmp_path):
    lake = tmp_path / "lake"
    rep = engine.export_parquet(home, str(lake), tables=("usage",))
    junk = lake / "usage" / f"_staging-{rep['machine_id']}-deadbeef" / "machine=laptop"
    junk.mkdir(parents=True)
    (junk / "x.parquet").write_bytes(b"half")
    engine.export_parquet(home, str(lake), tables=("usage",))
    assert not (lake / "usage" / f"_staging-{rep['machine_id']}-deadbeef").exists()


def test_renamed_machine_moves_its_partitions(home, tmp_path):
    lake = tmp_path / "lake"
    engine.export_parquet(home, str(lake), tables=("usage",))
    set_machine(home, "laptop-2")
    rep = engine.export_parquet(home, str(lake), tables=("usage",))
    assert rep["machine"] == "laptop-2"
    assert [p.name for p in (lake / "usage").iterdir()] == ["machine=laptop-2"]
    assert set(lake_table(lake, "usage").column("machine").to_pylist()) == {"laptop-2"}


def test_two_stores_under_one_name_are_refused(home, built, tmp_path):
    lake = tmp_path / "lake"
    engine.export_parquet(home, str(lake), tables=("usage",))
    other = tmp_path / "other"
    other.mkdir()
    set_machine(other, "laptop")
    ingest(CORPUS_HOME, other, ["gemini-cli"])
    before = parts(lake)
    with pytest.raises(ConfigError, match="another store already exports as machine 'laptop'"):
        engine.export_parquet(other, str(lake), tables=("usage",))
    assert parts(lake) == before


def test_fsspec_memory_lake(home):
    import fsspec

    url = f"memory://lake-{os.getpid()}"
    rep = engine.export_parquet(home, url, tables=("usage",))
    fs = fsspec.filesystem("memory")
    files = [p for p in fs.find(url.removeprefix("memory://")) if p.endswith(".parquet")]
    assert len(files) == rep["tables"]["usage"]["files_written"] > 0
    n = sum(ds.dataset(f, filesystem=fs, format="parquet").count_rows() for f in files)
    assert n == store_rows(home, "SELECT count(*) FROM usage")[0][0]
    again = engine.export_parquet(home, url, tables=("usage",))
    assert again["tables"]["usage"]["rows_written"] == 0


def test_dry_run_writes_nothing(home, tmp_path):
    lake = tmp_path / "lake"
    rep = engine.export_parquet(home, str(lake), dry_run=True)
    assert rep["tables"]["usage"]["rows_written"] == store_rows(home, "SELECT count(*) FROM usage")[0][0]
    assert not lake.exists()


# ---------------------------------------------------------------- bad input: one line


def cli(*args):
    return runner.invoke(app, ["export", "parquet", *map(str, args)])


def test_read_only_dest(home, tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        one_error_line(cli(ro / "lake", "--home", home), 1, "read-only", str(ro))
        assert list(ro.iterdir()) == []
    finally:
        ro.chmod(0o755)


def test_unreachable_dest(home, tmp_path):
    f = tmp_path / "a-file"
    f.write_text("x")
    one_error_line(cli(f / "lake", "--home", home), 1, "cannot write the lake")


def test_missing_fsspec_package(home):
    import importlib.util

    missing = next(
        (
            s
            for s, pkg in (("s3", "s3fs"), ("gs", "gcsfs"), ("abfs", "adlfs"))
            if importlib.util.find_spec(pkg) is None
        ),
        None,
    )
    if missing is None:
        pytest.skip("s3fs, gcsfs and adlfs are all installed")
    r = cli(f"{missing}://bucket/lake", "--home", home)
    one_error_line(r, 1, "ctxkeep[lake]", "not installed")


def test_unknown_scheme_and_tables_are_usage_errors(home, tmp_path):
    one_error_line(cli("nosuch://x/lake", "--home", home), 2, "unknown lake scheme")
    one_error_line(cli(tmp_path / "lake", "--tables", "usage,bogus", "--home", home), 2, "--tables", "bogus")
    assert not (tmp_path / "lake").exists()
    with pytest.raises(UsageError):
        engine.parse_tables("")


@pytest.mark.parametrize("name", ["a/b", "x=y", "has space", ""])
def test_bad_machine_name(home, tmp_path, name):
    (home / "config.toml").write_text(f'machine = "{name}"\n')
    one_error_line(cli(tmp_path / "lake", "--home", home), 1, "machine name", "partition")
    assert not list((tmp_path).rglob("*.parquet"))


def test_no_store(tmp_path):
    with pytest.raises(StoreError, match="no store yet"):
        engine.export_parquet(tmp_path / "empty", str(tmp_path / "lake"))
    one_error_line(cli(tmp_path / "lake", "--home", tmp_path / "empty"), 1, "no store yet")


def test_cli_json_and_text(home, tmp_path):
    import json

    r = cli(tmp_path / "lake", "--home", home, "--json")
    assert r.exit_code == 0, r.output
    rep = json.loads(r.stdout)
    n = store_rows(home, "SELECT count(*) FROM usage")[0][0]
    assert rep["tables"]["usage"]["rows_written"] == n
    r = cli(tmp_path / "lake", "--home", home)
    assert r.exit_code == 0, r.output
    assert "nothing changed since the last export" in r.stdout


def test_retention_keeps_history_in_the_lake_until_its_archives_are_deleted(home, tmp_path):
    import datetime as dt

    from ctxkeep.maintenance.retention import run_retention

    lake = tmp_path / "lake"
    engine.export_parquet(home, str(lake), tables=("entries",))
    gemini = {r[0] for r in store_rows(home, "SELECT entry_id FROM entries WHERE agent = 'gemini-cli'")}
    assert gemini
    conn = sqlite3.connect(home / "store.db")
    with conn:
        conn.execute("UPDATE entries SET status = 'archived' WHERE agent = 'gemini-cli'")
    conn.close()
    # retention moves them to the Parquet archive: analytics (and so the lake) keeps them
    later = dt.datetime.now(dt.UTC) + dt.timedelta(days=1)
    r = run_retention(home, now=later, archive_after_days=0, delete_archives_after_days=30)
    assert r["archived"]["entries"] == len(gemini)
    rep = engine.export_parquet(home, str(lake), tables=("entries",))
    assert {w["agent"] for w in rep["tables"]["entries"]["written"]} == {"gemini-cli"}
    e = lake_table(lake, "entries")
    flags = dict(zip(e.column("entry_id").to_pylist(), e.column("archived").to_pylist(), strict=True))
    assert {i for i in gemini if flags.get(i)} == gemini  # still there, marked archived
    # the archives are deleted by a later retention: the next export drops their rows
    r = run_retention(
        home, now=later + dt.timedelta(days=31), archive_after_days=0, delete_archives_after_days=30
    )
    assert r["archives_removed"] > 0
    rep = engine.export_parquet(home, str(lake), tables=("entries",))
    assert {x["agent"] for x in rep["tables"]["entries"]["removed"]} == {"gemini-cli"}
    left = set(lake_table(lake, "entries").column("entry_id").to_pylist())
    assert left.isdisjoint(gemini) and len(left) == store_rows(home, "SELECT count(*) FROM entries")[0][0]
    assert not (lake / "entries" / "machine=laptop" / "agent=gemini-cli").exists()


def test_reports_over_an_fsspec_lake_equal_the_local_ones(home):
    from ctxkeep.query import lake as lakeq
    from ctxkeep.query import reports as R

    url = f"memory://report-lake-{os.getpid()}"
    engine.export_parquet(home, url)
    f = R.Filters("UTC")
    con = lakeq.open_lake(url)
    try:
        got = R.usage_report(con, "daily", f, breakdown=True).rows
        tools = R.tools_report(con, f).rows
    finally:
        con.close()
    local, _ = R.open_store(home)
    try:
        want = R.usage_report(local, "daily", f, breakdown=True).rows
        want_tools = R.tools_report(local, f).rows
    finally:
        local.close()
    assert len(got) == len(want) > 10
    assert [(r.period, r.agent, r.model, r.total_tokens, r.responses) for r in got] == [
        (r.period, r.agent, r.model, r.total_tokens, r.responses) for r in want
    ]
    assert [(t.agent, t.tool_name, t.calls, t.errors) for t in tools] == [
        (t.agent, t.tool_name, t.calls, t.errors) for t in want_tools
    ]
