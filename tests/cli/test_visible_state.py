"""Visible state (issue 15): held-back data in the ingest summary and `sources`, and
`ingest --dry-run` (what would be read, per agent, nothing written)."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import time
from datetime import datetime

from typer.testing import CliRunner

from ctxkeep.cli import app
from tests.conftest import CORPUS_HOME, corpus

runner = CliRunner()
AIDER = "code/zen-mcp-server/.aider.chat.history.md"


def _aider_home(tmp_path):
    """A HOME holding a copy of the corpus's Aider chat history, just written."""
    home = tmp_path / "agent-home"
    dst = home / AIDER
    dst.parent.mkdir(parents=True)
    shutil.copyfile(corpus(AIDER), dst)
    return home, dst


def _entries(store, agent):
    c = sqlite3.connect(f"file:{store}/store.db?mode=ro", uri=True)
    try:
        return c.execute("SELECT count(*) FROM entries WHERE agent = ?", (agent,)).fetchone()[0]
    finally:
        c.close()


def _ingest(store, home, *extra):
    return runner.invoke(
        app,
        ["ingest", "--home", str(store), "--agent", "aider", "--no-prefect", "--json", *extra],
        env={"HOME": str(home)},
    )


def test_held_back_last_turn_is_reported_and_read_later(tmp_path, monkeypatch):
    home, f = _aider_home(tmp_path)
    # the baseline: the same file, idle at once (every turn read)
    base = tmp_path / "base"
    monkeypatch.setenv("CTXKEEP_IDLE_SECONDS", "0")
    assert _ingest(base, home).exit_code == 0
    want = _entries(base, "aider")
    # just written, with the default 120 s rule: its last turn waits, and ingest says so
    monkeypatch.setenv("CTXKEEP_IDLE_SECONDS", "120")
    os.utime(f, (time.time(), time.time()))
    store = tmp_path / "store"
    r = _ingest(store, home)
    assert r.exit_code == 0, r.output
    s = json.loads(r.stdout)
    first = _entries(store, "aider")
    assert 0 < first < want
    held = [h for h in s["held_back"] if h["path"] == str(f)]
    assert len(held) == 1 and held[0]["reason"] == "recently changed" and held[0]["agent"] == "aider"
    ready = datetime.fromisoformat(held[0]["ready_at"].replace("Z", "+00:00"))
    assert abs(ready.timestamp() - (f.stat().st_mtime + 120)) < 1
    # the text summary and `sources` say it too
    text = runner.invoke(app, ["ingest", "--home", str(store), "--no-prefect"], env={"HOME": str(home)})
    assert "held back: the last turn of 1 recently changed file (aider 1)" in text.stdout
    assert "CTXKEEP_IDLE_SECONDS=120" in text.stdout
    src = json.loads(
        runner.invoke(app, ["sources", "--home", str(store), "--json"], env={"HOME": str(home)}).stdout
    )
    row = next(x for x in src["rows"] if x["agent"] == "aider")
    assert [h["path"] for h in row["held_back"]] == [str(f)] and "held back" in row["reason"]
    # once the file is idle, the next ingest reads the rest, and nothing is held back
    old = time.time() - 3600
    os.utime(f, (old, old))
    s = json.loads(_ingest(store, home).stdout)
    assert _entries(store, "aider") == want and s["entries_new"] == want - first
    assert s["held_back"] == []


def test_ingest_dry_run_reads_sizes_and_writes_nothing(tmp_path):
    store = tmp_path / "store"
    r = runner.invoke(
        app, ["ingest", "--dry-run", "--home", str(store), "--json"], env={"HOME": str(CORPUS_HOME)}
    )
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert not store.exists()  # no store created
    assert d["dry_run"] is True and d["store"] is None and d["unchanged"] == 0
    # the corpus's Claude Code and Codex session files, sized independently (with the
    # sub-agent's .meta.json the vault keeps beside its transcript: a sidecar)
    for agent, patterns in (
        ("claude-code", (".claude/projects/**/*.jsonl", ".claude/projects/*/*/subagents/*.meta.json")),
        ("codex", (".codex/sessions/**/*.jsonl",)),
    ):
        files = sorted(p for pattern in patterns for p in CORPUS_HOME.glob(pattern))
        a = next(x for x in d["agents"] if x["agent"] == agent)
        assert a["files"] == len(files) and a["bytes"] == sum(p.stat().st_size for p in files)
    assert d["files"] == sum(a["files"] for a in d["agents"])
    assert d["bytes"] == sum(a["bytes"] for a in d["agents"])
    # after a real ingest, the dry run reads nothing, and leaves the store as it was
    assert (
        runner.invoke(
            app, ["ingest", "--home", str(store), "--no-prefect"], env={"HOME": str(CORPUS_HOME)}
        ).exit_code
        == 0
    )
    # (a reader maps the -shm index of a WAL database: not data, left out)
    before = {p.name: p.stat().st_mtime_ns for p in store.iterdir() if not p.name.endswith("-shm")}
    r = runner.invoke(app, ["ingest", "--dry-run", "--home", str(store)], env={"HOME": str(CORPUS_HOME)})
    assert r.exit_code == 0 and "nothing to read" in r.stdout
    assert {p.name: p.stat().st_mtime_ns for p in store.iterdir() if not p.name.endswith("-shm")} == before
