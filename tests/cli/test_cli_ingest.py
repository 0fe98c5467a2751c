"""The ``ctxkeep ingest`` command (in-process, ``--no-prefect``; the Prefect path is
covered by test_ingest_flow.py)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from conftest import CORPUS_HOME
from ctxkeep.cli import app


def _run(args, monkeypatch, home=CORPUS_HOME):
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    monkeypatch.delenv("CODEX_HOME", raising=False)
    return CliRunner().invoke(app, args)


CC = ["--agent", "claude-code", "--agent", "codex"]  # the figures below are of these two agents


def test_ingest_json_then_noop(store_home, monkeypatch):
    r = _run(["ingest", "--home", str(store_home), "--no-prefect", "--json", *CC], monkeypatch)
    assert r.exit_code == 0, r.output
    s = json.loads(r.stdout)
    assert (s["files"], s["files_read"], s["entries_new"], s["bytes"], s["quarantined"]) == (
        16,
        16,
        3215,
        6439453,
        0,
    )
    r2 = _run(["ingest", "--home", str(store_home), "--no-prefect", "--json", *CC], monkeypatch)
    s2 = json.loads(r2.stdout)
    assert (s2["files"], s2["files_read"], s2["entries_new"], s2["bytes"]) == (16, 0, 0, 0)


def test_ingest_summary_line(store_home, monkeypatch):
    r = _run(
        ["ingest", "--home", str(store_home), "--no-prefect", "--no-progress", "--agent", "codex"],
        monkeypatch,
    )
    assert r.exit_code == 0, r.output
    assert r.stdout.startswith("ingested 2,229 new entries from 6 of 6 files (")
    assert "quarantined 0 lines" in r.stdout


def test_ingest_unknown_agent_is_one_line(store_home, monkeypatch):
    r = _run(["ingest", "--home", str(store_home), "--agent", "cursorx"], monkeypatch)
    assert r.exit_code == 2
    from ctxkeep.sources import SOURCES

    assert r.output.strip().splitlines() == [f"error: unknown agent cursorx - known: {', '.join(SOURCES)}"]


def test_ingest_explicit_path(store_home, monkeypatch, tmp_path):
    src = (
        CORPUS_HOME
        / ".codex/sessions/2025/10/31/rollout-2025-10-31T18-36-16-fa1ac8bf-348e-4b9a-a06d-767050fa1e10.jsonl"
    )
    r = _run(
        [
            "ingest",
            "--home",
            str(store_home),
            "--no-prefect",
            "--json",
            "--path",
            str(src),
            "--path",
            str(tmp_path / "missing.jsonl"),
        ],
        monkeypatch,
        home=tmp_path,
    )
    assert r.exit_code == 0, r.output
    s = json.loads(r.stdout)
    assert (s["files"], s["entries_new"]) == (1, 2)
    assert s["problems"] == [f"{tmp_path / 'missing.jsonl'}: no such file or directory"]


def test_noop_ingest_imports_neither_prefect_nor_duckdb(store_home, monkeypatch, tmp_path):
    """A no-op re-ingest must stay cheap as a whole process (issue 2: ≤ 5 s on a
    200 MB tree): nothing changed → no Prefect server, no DuckDB import."""
    import os
    import subprocess
    import sys

    from conftest import ROOT

    empty_home = tmp_path / "user"
    empty_home.mkdir()
    code = (
        "import sys, runpy; sys.argv = ['ctxkeep', 'ingest', '--home', sys.argv[1], '--json'];\n"
        "try:\n    runpy.run_module('ctxkeep', run_name='__main__')\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in ('prefect', 'duckdb') if m in sys.modules))"
    )
    env = dict(os.environ, HOME=str(empty_home))
    r = subprocess.run(
        [sys.executable, "-c", code, str(store_home)],
        env=env,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "[]"
    assert json.loads("\n".join(r.stdout.strip().splitlines()[:-1]))["files"] == 0


def test_an_unknown_agent_in_config_is_warned_about(tmp_path):
    home = tmp_path / "h"
    home.mkdir()
    (home / "config.toml").write_text("[agents.codx]\nenabled = true\n")
    (tmp_path / "empty").mkdir()
    r = CliRunner().invoke(
        app, ["ingest", "--home", str(home), "--path", str(tmp_path / "empty"), "--no-prefect"]
    )
    assert r.exit_code == 0
    assert "config.toml names agent 'codx', which ctxkeep has no source for" in r.stderr


def test_ingest_of_paths_that_do_not_exist_fails(tmp_path):
    r = CliRunner().invoke(
        app, ["ingest", "--home", str(tmp_path / "h"), "--path", str(tmp_path / "nope.jsonl")]
    )
    assert r.exit_code == 1
    assert r.stderr.startswith("error: no such file or directory: ") and "nope.jsonl" in r.stderr
