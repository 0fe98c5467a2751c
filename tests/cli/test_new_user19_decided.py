"""The lead's decisions on newuser19's open findings (nufix19 section 5), each command a
whole process on the corpus store:

- F10: an ingest that finds nothing new records no run (one write less on the hook
  path), so the time ``stats``, ``sources`` and the app show is the last run that
  found something; a user read "last ingest 04:25" at 04:40 as "the schedule is not
  running". The text says "last new data" (option (c)); the JSON keys stay."""

from __future__ import annotations

import json
import os
import subprocess
import sys


def _run(store, *args: str, columns: int = 80) -> str:
    env = dict(os.environ, CTXKEEP_IDLE_SECONDS="0", TZ="UTC", COLUMNS=str(columns))
    env.pop("CTXKEEP_HOME", None)
    r = subprocess.run(
        [sys.executable, "-m", "ctxkeep", *args, "--home", str(store)],
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
    )
    assert r.returncode == 0, r.stderr[-500:]
    return r.stdout


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_stats_and_sources_say_last_new_data(corpus_store):
    store = corpus_store[0]
    st = json.loads(_run(store, "stats", "--json"))
    assert st["last_ingest"]  # the key stays
    text = _flat(_run(store, "stats"))
    assert f"last new data {st['last_ingest']}" in text and "last ingest" not in text
    src = json.loads(_run(store, "sources", "--json"))
    row = next(r for r in src["rows"] if r["agent"] == "claude-code")
    shown = row["last_ingest"][:16].replace("T", " ")
    for cols in (80, 160):  # two lines per agent below 110 columns, a table from 110
        text = _flat(_run(store, "sources", columns=cols))
        assert "last ingest" not in text, cols
        assert "last new data" in text and shown in text, cols
