"""The real Prefect ingest flow, whole process, no Prefect server configured (Prefect
starts its temporary local server), no network: summary figures and a quiet output."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from conftest import ROOT

NOISE = re.compile(r"telemetry|analytics|Traceback|ERROR|Error|WARNING|warning|"
                   r"Failed|ConnectError|httpx", re.I)


def _tree(root) -> dict:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in root.rglob("*")}


@pytest.mark.slow
def test_prefect_flow_ingests_corpus_quietly(home_copy, tmp_path, corpus_store):
    _, reference = corpus_store          # the same corpus through the plain pipeline
    store = tmp_path / "store"
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PREFECT_", "CTXKEEP_", "CLAUDE_CONFIG_DIR", "CODEX_HOME"))}
    env["CTXKEEP_IDLE_SECONDS"] = "0"    # home_copy was just written (see conftest)
    env["HOME"] = str(home_copy)
    before = _tree(home_copy)
    r = subprocess.run([sys.executable, "-m", "ctxkeep", "ingest", "--home", str(store), "--json"],
                       env=env, capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    s = json.loads(r.stdout)
    assert (s["files"], s["files_read"], s["entries_new"], s["quarantined"], s["lines"]) == \
        (reference.files, reference.files_read, reference.entries_new, reference.quarantined,
         reference.lines)
    assert s["per_agent"] == reference.per_agent
    assert s["per_agent"]["claude-code"] == 986 and s["per_agent"]["codex"] == 2229
    assert s["analytics"] == f"analytics: {reference.entries_new} entries synced"
    noisy = [ln for ln in r.stderr.splitlines() if NOISE.search(ln)]
    assert noisy == []
    # the temporary server's database lives beside the store, not in the user's home
    # and nothing in the user's home (session files included) was written
    assert (store / "prefect").is_dir()
    assert _tree(home_copy) == before
    conn_runs = __import__("sqlite3").connect(store / "store.db").execute(
        "SELECT flow, status, entries_new FROM runs").fetchall()
    assert conn_runs == [("ingest", "ok", reference.entries_new)]
