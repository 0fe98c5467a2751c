"""What a new user found in session 19's trial (newuser19 F3, F4), on the corpus store,
each command a whole process at COLUMNS=80:

- F3: a tool result of Claude Code session fe5e (an ``npm create`` prompt) holds a
  terminal's colours and cursor moves; its search hit printed them escaped
  (``\\x1b[36m``), half the snippet noise. They are dropped from the excerpt (the
  snippet and title, for every front end); ``show --json`` keeps the stored text exact.
- F4: a Chinese snippet of 75 characters took 106 columns (wrapped by characters, not
  by the cells a terminal gives a CJK character): every line now fits 80 cells."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from rich.cells import cell_len


def _search(store, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, CTXKEEP_IDLE_SECONDS="0", TZ="UTC", COLUMNS="80")
    env.pop("CTXKEEP_HOME", None)
    r = subprocess.run(
        [sys.executable, "-m", "ctxkeep", "search", *args, "--home", str(store)],
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
    )
    assert r.returncode == 0, r.stderr[-500:]
    return r


def test_a_commands_colours_are_dropped_from_a_hit(corpus_store):
    store = corpus_store[0]
    q = ("Would you like your code inside", "--kind", "tool_result", "--agent", "claude-code")
    text = _search(store, *q).stdout
    assert "? Would you like your code inside a `src/`" in text, text[:600]
    assert "\\x1b" not in text and "[36m" not in text and "[?25l" not in text
    # --json's snippet is the same excerpt (for scripts and agents alike); the store's
    # text is kept exact (show --json)
    hit = json.loads(_search(store, *q, "--json").stdout)["hits"][0]
    assert "\x1b" not in hit["snippet"] and "? Would you like" in hit["snippet"]
    shown = subprocess.run(
        [sys.executable, "-m", "ctxkeep", "show", hit["entry_id"], "--json", "--home", str(store)],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert "\x1b[36m?" in json.loads(shown.stdout)["entries"][0]["text"]


def test_a_cjk_snippet_fits_80_cells(corpus_store):
    text = _search(corpus_store[0], "调研").stdout
    lines = text.splitlines()
    assert any(cell_len(x) != len(x) for x in lines), "no CJK line to measure"
    wide = [x for x in lines if cell_len(x) > 80]
    assert not wide, wide[:2]
    # nothing lost by the wrap: the snippet's characters all printed
    snippet = json.loads(_search(corpus_store[0], "调研", "--json").stdout)["hits"][0]["snippet"]
    assert "".join(snippet.split())[:40] in "".join(text.split())


def test_reindex_names_the_users_own_duckdb_objects_it_drops(store):
    """newuser19 F14: `reindex` (and doctor --repair, reparse, restore: the analytics
    file is deleted and rebuilt from SQLite) dropped a table and a view the user made in
    analytics.duckdb without a word; its summary now names them."""
    import duckdb

    with duckdb.connect(str(store / "analytics.duckdb")) as db:
        db.execute("CREATE TABLE my_budget AS SELECT 100.0 AS usd")
        db.execute("CREATE VIEW my_costs AS SELECT agent, sum(cost_usd) AS c FROM usage GROUP BY 1")
    env = dict(os.environ, CTXKEEP_IDLE_SECONDS="0")
    r = subprocess.run(
        [sys.executable, "-m", "ctxkeep", "reindex", "--home", str(store)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-500:]
    said = " ".join((r.stdout + r.stderr).split())
    assert "dropped 1 table and 1 view not made by ctxkeep: my_budget, my_costs" in said, said[-600:]
    with duckdb.connect(str(store / "analytics.duckdb"), read_only=True) as db:
        names = {n for (n,) in db.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    assert "usage" in names and not {"my_budget", "my_costs"} & names
    # a second reindex has nothing of the user's to drop: says nothing of it
    r = subprocess.run(
        [sys.executable, "-m", "ctxkeep", "reindex", "--home", str(store)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert r.returncode == 0 and "not made by ctxkeep" not in r.stdout + r.stderr
