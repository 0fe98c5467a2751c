"""The hook path (issue 26 target 1): ``ingest --path FILE`` of a few new lines.

- the whole-store integrity check (``store_safety.check_integrity``, every page) is
  skipped only when the store is known undamaged and untouched since
  (``store_safety.known_good``); a store changed behind ctxkeep's back is read whole
  again and its damage found; a bigger ingest always reads every page;
- a report right after a hook-path ingest (DuckDB deferred) counts the new usage, and
  its catch-up keeps the store known good;
- what the hook path stores equals what a full ingest of the same file stores (entries,
  token estimates, redaction).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sqlite3
import uuid
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ctxkeep.cli import app
from ctxkeep.pipeline import engine
from ctxkeep.sinks.files import INTEGRITY_STAMP
from ctxkeep.sinks.sqlite import store_safety
from ctxkeep.sinks.sqlite.store_safety import StoreDamaged
from session_lines import USAGE, claude_lines

START = dt.datetime(2026, 11, 30, 12, tzinfo=dt.UTC)


@pytest.fixture
def checks(monkeypatch) -> list[Path]:
    """The stores ``check_integrity`` read whole, in order."""
    seen: list[Path] = []
    real = store_safety.check_integrity

    def counting(conn, path):
        seen.append(Path(path))
        return real(conn, path)

    monkeypatch.setattr(store_safety, "check_integrity", counting)
    return seen


def _session(tmp_path: Path, n: int, word: str = "quokka") -> tuple[Path, list[str]]:
    """A Claude Code session file holding the first ``n`` of 2n lines; returns the
    file and the lines still to append."""
    sid = str(uuid.uuid4())
    lines = claude_lines(sid, 2 * n, START, word=word)
    path = tmp_path / "user" / ".claude" / "projects" / "-tmp-hook-bench" / f"{sid}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines[:n]) + "\n")
    return path, lines[n:]


def _append(path: Path, lines: list[str]) -> None:
    with path.open("a") as f:
        f.write("\n".join(lines) + "\n")


def _entries(home: Path) -> int:
    with sqlite3.connect(f"file:{home / 'store.db'}?mode=ro", uri=True) as c:
        return c.execute("SELECT count(*) FROM entries").fetchone()[0]


def test_a_few_new_lines_into_a_known_good_store_skip_the_whole_store_check(tmp_path, checks):
    home = tmp_path / "home"
    path, rest = _session(tmp_path, 10)
    engine.run_ingest(home, paths=[path])
    assert checks == [home / "store.db"]  # a store never checked: every page read
    assert store_safety.known_good(home)
    _append(path, rest)
    s = engine.run_ingest(home, paths=[path], defer_analytics=None)
    assert s.entries_new == 10 and _entries(home) == 20
    assert checks == [home / "store.db"]  # not read again
    assert store_safety.known_good(home)  # this run's own writes keep it known good


def test_a_bigger_ingest_reads_every_page_even_of_a_known_good_store(tmp_path, checks, monkeypatch):
    home = tmp_path / "home"
    path, rest = _session(tmp_path, 10)
    engine.run_ingest(home, paths=[path])
    monkeypatch.setattr(engine, "INCREMENTAL_CHECK_BYTES", 100)  # the new lines are "big"
    _append(path, rest)
    engine.run_ingest(home, paths=[path])
    assert len(checks) == 2


def test_a_store_changed_behind_ctxkeeps_back_is_read_whole_and_its_damage_found(tmp_path, checks):
    home = tmp_path / "home"
    path, rest = _session(tmp_path, 200)  # entry rows on several leaf pages
    engine.run_ingest(home, paths=[path])
    assert store_safety.known_good(home)
    c = sqlite3.connect(home / "store.db")
    c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    ps = c.execute("PRAGMA page_size").fetchone()[0]
    pages = [r[0] for r in c.execute("SELECT pageno FROM dbstat WHERE name='entry_rows' AND pagetype='leaf'")]
    c.close()
    assert len(pages) > 1
    with open(home / "store.db", "r+b") as f:  # garbage over a leaf page of the entries
        f.seek((pages[len(pages) // 2] - 1) * ps)
        f.write(os.urandom(ps))
    assert not store_safety.known_good(home)
    _append(path, rest[:10])
    with pytest.raises(StoreDamaged):
        engine.run_ingest(home, paths=[path], defer_analytics=None)
    assert len(checks) == 2
    assert not (home / INTEGRITY_STAMP).exists()  # no later run trusts it unchecked


def test_a_report_right_after_a_hook_path_ingest_counts_the_new_usage(tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    path, rest = _session(tmp_path, 10)
    engine.run_ingest(home, paths=[path])  # a store with its DuckDB file

    def output_tokens() -> int:
        r = CliRunner().invoke(app, ["report", "daily", "--home", str(home), "--json", "-z", "UTC"])
        assert r.exit_code == 0, r.output
        return sum(row["output_tokens"] for row in json.loads(r.stdout)["rows"])

    assert output_tokens() == 5 * USAGE["output_tokens"]  # 5 assistant lines of the first 10
    _append(path, rest)
    r = CliRunner().invoke(
        app, ["ingest", "--no-prefect", "--home", str(home), "--path", str(path), "--json"]
    )
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["analytics"].startswith("analytics: deferred")  # the hook path
    assert output_tokens() == 10 * USAGE["output_tokens"]
    assert store_safety.known_good(home)  # the report's catch-up kept it so


def _hostile(lines: list[str]) -> list[str]:
    """``lines`` with texts a hook path must treat as a full ingest does: secrets (a
    GitHub token, a password, an AWS key id), CJK, and texts longer than
    ``tokens.BPE_FULL_CHARS`` (token estimates sampled)."""
    texts = [
        "token ghp_" + "aB3dE5gH7jK9mN1pQ3sT5vX7zA9cE1gI3kM5 and password=Tr0ub4dor&3xQ9!",
        "AKIAIOSFODNN7REALKEY in the log; 日本語のテキストと한국어 텍스트 " * 3,
        "a long tool output line of a build log, 12345 files compiled\n" * 120,
        "export OPENAI_API_KEY=sk-proj-" + "Zx9Qw8Er7Ty6Ui5Op4As3Df2Gh1Jk0Lz9Xc8Vb7Nm6" + " " + "詳細" * 2500,
    ]
    out = []
    for i, line in enumerate(lines):
        rec = json.loads(line)
        t = texts[i % len(texts)]
        if rec["type"] == "user":
            rec["message"]["content"] = t
        else:
            rec["message"]["content"] = [{"type": "text", "text": t}]
        out.append(json.dumps(rec, ensure_ascii=False))
    return out


def test_the_hook_path_stores_what_a_full_ingest_stores(tmp_path, monkeypatch):
    """Entries, contents (token estimates and methods), FTS chunks and usage of a file
    ingested by ``ingest --path`` in two steps equal those of one full ingest of the
    same file into another store: nothing of redaction or token counting is traded
    for the hook path's speed."""
    from ctxkeep.sources.contract import DiscoveryContext
    from store_digest import store_digest

    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    path, rest = _session(tmp_path, 10)
    path.write_text("\n".join(_hostile(path.read_text().splitlines())) + "\n")
    hook, full = tmp_path / "hook", tmp_path / "full"
    engine.run_ingest(hook, paths=[path])
    _append(path, _hostile(rest))
    r = CliRunner().invoke(
        app, ["ingest", "--no-prefect", "--home", str(hook), "--path", str(path), "--json"]
    )
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["entries_new"] == 10
    engine.run_ingest(full, ctx=DiscoveryContext(home=tmp_path / "user", env={}))
    a, b = store_digest(hook), store_digest(full)
    for table in ("entries", "contents", "chunks", "usage", "quarantine", "watermarks"):
        assert a[table] == b[table], table
    with sqlite3.connect(f"file:{hook / 'store.db'}?mode=ro", uri=True) as c:
        methods = {m for (m,) in c.execute("SELECT DISTINCT token_method FROM contents")}
        stored = "\n".join(t for (t,) in c.execute("SELECT text FROM chunks"))
    assert methods == {"o200k_base", "o200k_base-sampled"}
    for secret in ("ghp_aB3dE5", "Tr0ub4dor", "sk-proj-Zx9Q"):
        assert secret not in stored
    assert "[REDACTED:" in stored


def test_the_hook_path_leaves_importlib_metadata_unloaded(tmp_path):
    """Polars' import loads ``importlib.metadata`` (with ``email``, ``socket`` …: ~8-15
    ms of CPU) for a call the hook path never makes: a few new lines' ingest defers it
    (``prestart.defer_metadata``), in a process of its own as the hook's worker and
    ``ingest --path`` run, and still stores the lines."""
    import subprocess
    import sys

    path, _ = _session(tmp_path, 10)
    code = f"""
import sys
from pathlib import Path
from ctxkeep.service.ingest import IngestRequest, ingest
req = IngestRequest(paths=(Path({str(path)!r}),), prefect=False)
s = ingest(Path({str(tmp_path / "store")!r}), req).summary
print(s["entries_new"], "polars" in sys.modules, "email" in sys.modules)
"""
    env = {**os.environ, "HOME": str(tmp_path / "user")}
    r = subprocess.run(
        [sys.executable, "-P", "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["10", "True", "False"]


def test_the_hooks_worker_imports_only_its_agents_source(tmp_path):
    """The hooks' worker names its agent (``worker.ingest_file``): ``--path``'s
    matching asks that agent's source only, and the ~40 other source modules are not
    imported (~20 ms of CPU at load 35); the lines are stored."""
    import subprocess
    import sys

    path, _ = _session(tmp_path, 10)
    code = f"""
import sys
from pathlib import Path
from ctxkeep.service.ingest import IngestRequest, ingest
req = IngestRequest(agents=("claude-code",), paths=(Path({str(path)!r}),), prefect=False, catch_up_analytics=False)
s = ingest(Path({str(tmp_path / "store")!r}), req).summary
loaded = sorted(m for m in sys.modules if m.startswith("ctxkeep.sources.") and m.count(".") == 2)
print(s["entries_new"], "ctxkeep.sources.claude_code" in loaded, "ctxkeep.sources.grok" in loaded, len(loaded) < 12)
"""
    env = {**os.environ, "HOME": str(tmp_path / "user")}
    r = subprocess.run(
        [sys.executable, "-P", "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["10", "True", "False", "True"], r.stdout


def test_ingest_path_of_a_few_new_lines_ends_without_the_teardown(tmp_path):
    """``ctxkeep ingest --path FILE`` of a few new lines ends with ``prestart.exit_now``
    (its atexit handlers run and its output is flushed, then ``os._exit``: the
    interpreter's teardown, ~0.01 CPU s, skipped); the same command with nothing new
    exits as usual while it catches DuckDB up (the engine ran: the first run left
    DuckDB to its readers), and ends without the teardown once nothing is new and DuckDB
    is current (no engine ran; the plan's connection is closed)."""
    import subprocess
    import sys

    path, rest = _session(tmp_path, 10)
    code = f"""
import atexit, os, sys
real_exit = os._exit
os._exit = lambda status: (os.write(2, b"os._exit\\n"), real_exit(status))
atexit.register(lambda: sys.stderr.write("handler\\n"))
sys.argv = ["ctxkeep", "ingest", "--home", {str(tmp_path / "store")!r}, "--path", {str(path)!r}, "--json"]
from ctxkeep.__main__ import main
main()
"""
    env = {**os.environ, "HOME": str(tmp_path / "user")}
    for new, quick in ((10, True), (0, False), (0, True)):
        r = subprocess.run(
            [sys.executable, "-P", "-c", code], capture_output=True, text=True, env=env, timeout=120
        )
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["entries_new"] == new
        assert "handler" in r.stderr and ("os._exit" in r.stderr) == quick, (new, r.stderr)


def _plan_of(home: Path, paths: list[Path]) -> tuple[list[tuple[str, int | None]], int, list[str]]:
    """(each todo file with its watermark's offset, or None: read from byte 0; the
    unchanged count; the SQL statements the plan ran) of a plan of ``paths``."""
    from ctxkeep.pipeline.plan import plan
    from ctxkeep.sinks import sqlite as sqlite_store

    conn = sqlite_store.connect(home, readonly=True)
    sql: list[str] = []
    conn.set_trace_callback(sql.append)
    try:
        p = plan(home, conn, paths=paths)
    finally:
        conn.close()
    return [(str(f.path), wm.offset if wm else None) for f, wm in p.todo], p.unchanged, sql


def _whole_reads(sql: list[str]) -> list[str]:
    """The statements of ``sql`` that read every watermark's facts or every vault file."""
    return [
        s
        for s in sql
        if s.strip() == "SELECT path FROM vault_files"
        or s.startswith("SELECT path, dev")
        and s.strip().endswith("FROM watermarks")
    ]


def test_a_plan_of_a_few_paths_reads_their_rows_only_and_decides_as_a_whole_store_read(tmp_path, monkeypatch):
    """``ingest --path`` (the hook path, planned twice) reads the watermark facts and
    the vault's manifest rows of its own files by path, not the whole store's (at 12 GB
    ~55 ms of CPU per plan, session 24), and decides the same: an unchanged file, one
    with new lines (from its offset), and one whose bytes the vault does not hold (read
    again from byte 0, so the vault takes them in)."""
    from ctxkeep.pipeline import plan as plan_mod

    monkeypatch.setenv("CTXKEEP_IDLE_SECONDS", "0")
    home = tmp_path / "home"
    grown, rest = _session(tmp_path, 10, word="wombat")
    same, _ = _session(tmp_path, 10, word="numbat")
    unvaulted, _ = _session(tmp_path, 10, word="bilby")
    engine.run_ingest(home, paths=[grown, same, unvaulted])
    _append(grown, rest)
    with sqlite3.connect(home / "store.db") as c:  # as a store from before the vault holds it
        vf = "(SELECT vfile_id FROM vault_files WHERE path = ?)"
        gens = f"(SELECT gen_id FROM vault_generations WHERE vfile_id IN {vf})"
        for table in ("vault_media", "vault_segments"):
            c.execute(f"DELETE FROM {table} WHERE gen_id IN {gens}", (str(unvaulted),))
        c.execute(f"DELETE FROM vault_generations WHERE vfile_id IN {vf}", (str(unvaulted),))
        c.execute("DELETE FROM vault_files WHERE path = ?", (str(unvaulted),))
    paths = [grown, same, unvaulted]
    todo, unchanged, sql = _plan_of(home, paths)
    offset = grown.stat().st_size - len("\n".join(rest) + "\n")
    assert sorted(todo) == sorted([(str(grown), offset), (str(unvaulted), None)]) and unchanged == 1
    assert not _whole_reads(sql) and any("FROM vault_files WHERE path IN" in s for s in sql)
    monkeypatch.setattr(plan_mod, "FEW_FILES", 0)  # the whole store's rows: the same plan
    todo0, unchanged0, sql0 = _plan_of(home, paths)
    assert (sorted(todo0), unchanged0) == (sorted(todo), unchanged)
    assert len(_whole_reads(sql0)) == 2
