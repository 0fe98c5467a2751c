"""One maintenance run at a time per store (acceptance: two processes).

Two ingest processes started together against one store: the second waits for the
store lock, nothing is duplicated and nothing is lost. With ``wait=False`` the second
exits cleanly with StoreBusy instead.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys

import pytest

from conftest import CORPUS_HOME, hold_lock_in_subprocess

INGEST = r"""
import json, sys
from pathlib import Path
from ctxkeep.errors import StoreBusy
from ctxkeep.pipeline.engine import run_ingest
from ctxkeep.sources.contract import DiscoveryContext
try:
    s = run_ingest(Path(sys.argv[1]), ctx=DiscoveryContext(home=Path(sys.argv[2]), env={}),
                   wait=sys.argv[3] == "wait")
    print(json.dumps({"entries_new": s.entries_new, "files_read": s.files_read}))
except StoreBusy as e:
    print(json.dumps({"busy": str(e)}))
    sys.exit(3)
"""


def _start(home, mode="wait"):
    return subprocess.Popen(
        [sys.executable, "-c", INGEST, str(home), str(CORPUS_HOME), mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.slow
def test_two_ingests_at_once_duplicate_nothing_and_lose_nothing(store_home, corpus_store):
    _, reference = corpus_store  # the same corpus ingested alone
    a, b = _start(store_home), _start(store_home)
    outs = [p.communicate(timeout=600) for p in (a, b)]
    assert [p.returncode for p in (a, b)] == [0, 0], [o[1][-2000:] for o in outs]
    import json

    res = sorted((json.loads(o[0]) for o in outs), key=lambda r: -r["entries_new"])
    assert res[0]["entries_new"] == reference.entries_new > 3000
    assert res[1]["entries_new"] == 0  # the second found everything stored
    conn = sqlite3.connect(store_home / "store.db")
    n, distinct = conn.execute("SELECT count(*), count(DISTINCT entry_id) FROM entries").fetchone()
    assert n == distinct == reference.entries_new
    assert (
        conn.execute("SELECT count(*) FROM contents").fetchone()[0]
        == conn.execute(
            "SELECT count(DISTINCT content_hash) FROM entries WHERE content_hash IS NOT NULL"
        ).fetchone()[0]
    )
    assert (
        conn.execute(
            "SELECT count(*) FROM chunks WHERE content_id NOT IN (SELECT content_id FROM contents)"
        ).fetchone()[0]
        == 0
    )
    runs = conn.execute(
        "SELECT started_at, finished_at, status FROM runs WHERE flow='ingest' ORDER BY started_at"
    ).fetchall()
    assert [r[2] for r in runs] == ["ok", "ok"]
    assert runs[1][0] >= runs[0][1]  # the runs did not overlap: one waited
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()


def test_second_ingest_without_wait_exits_cleanly(store_home):
    holder = hold_lock_in_subprocess(store_home)
    try:
        p = _start(store_home, "nowait")
        out, errout = p.communicate(timeout=300)
    finally:
        holder.communicate(b"\n", timeout=30)
    assert p.returncode == 3, errout[-2000:]
    assert "another ctxkeep maintenance run holds the store" in out
    assert "Traceback" not in errout
    assert (
        not (store_home / "store.db").exists()
        or sqlite3.connect(store_home / "store.db").execute("SELECT count(*) FROM entries").fetchone()[0] == 0
    )


def test_a_waiting_ingest_says_why(tmp_path):
    """While another process holds the store lock, run_ingest tells ``hooks.on_wait``
    (the CLI prints a line) and goes on once the lock is free."""
    import subprocess
    import sys
    import time

    from ctxkeep.pipeline import engine as pipeline
    from ctxkeep.sources.contract import DiscoveryContext

    home = tmp_path / "store"
    home.mkdir()
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            (
                "import sys, time; from pathlib import Path; from ctxkeep.sinks.lock import StoreLock; "
                f"lk = StoreLock(Path({str(home)!r})); lk.acquire(0); print('held', flush=True); "
                "time.sleep(1.5); lk.release()"
            ),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout.readline().strip() == "held"
    told = []
    old = pipeline.hooks.on_wait
    pipeline.hooks.on_wait = told.append
    try:
        t0 = time.monotonic()
        s = pipeline.run_ingest(home, ctx=DiscoveryContext(home=tmp_path / "nohome", env={}))
        waited = time.monotonic() - t0
    finally:
        pipeline.hooks.on_wait = old
        child.wait(10)
    assert told == [str(home / "ingest.lock")]
    assert waited > 0.5 and s.entries_new == 0 and s.files == 0
