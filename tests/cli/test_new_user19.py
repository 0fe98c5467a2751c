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

    def reindex() -> subprocess.CompletedProcess:
        argv = [sys.executable, "-m", "ctxkeep", "reindex", "--home", str(store)]
        return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)

    r = reindex()
    assert r.returncode == 0, r.stderr[-500:]
    said = " ".join((r.stdout + r.stderr).split())
    assert "dropped 1 table and 1 view not made by ctxkeep: my_budget, my_costs" in said, said[-600:]
    with duckdb.connect(str(store / "analytics.duckdb"), read_only=True) as db:
        names = {n for (n,) in db.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    assert "usage" in names and not {"my_budget", "my_costs"} & names
    # a second reindex has nothing of the user's to drop: says nothing of it
    r = reindex()
    assert r.returncode == 0 and "not made by ctxkeep" not in r.stdout + r.stderr


def test_a_file_rewritten_longer_in_place_is_read_again_not_torn(tmp_path):
    """newuser19 F16: a session file replaced in place by a longer copy (same inode,
    same head, other bytes where the watermark stood) was read on from the old offset:
    a record cut in two went to quarantine as bad JSON and "format drift" was announced.
    The watermark must end a line; where it does not, the file is read again whole and
    every record of the new copy is stored once."""
    import sqlite3

    proj = tmp_path / "home" / ".claude" / "projects" / "-tmp-x"
    proj.mkdir(parents=True)

    def line(i: int, words: str) -> str:
        return json.dumps(
            {"type": "user", "uuid": f"u{i}", "sessionId": "s1", "timestamp": f"2025-01-01T00:00:{i:02d}Z",
             "cwd": "/tmp/x", "message": {"role": "user", "content": f"{words} {i}"}}
        )  # fmt: skip

    f = proj / "s.jsonl"
    # a head of 4 KiB and more (the watermark's head hash covers at most 4,096 bytes)
    head = [line(i, "head " + "x" * 200) for i in range(10, 40)]
    f.write_text("\n".join(head + [line(i, "first") for i in range(3)]) + "\n")
    ino = f.stat().st_ino
    env = dict(os.environ, CTXKEEP_IDLE_SECONDS="0", HOME=str(tmp_path / "home"))
    env.pop("CTXKEEP_HOME", None)
    args = [sys.executable, "-m", "ctxkeep", "ingest", "--home", str(tmp_path / "store"), "--no-progress"]
    assert subprocess.run(args, env=env, capture_output=True, timeout=300).returncode == 0
    # the same first line, then longer other lines: the old offset falls inside one
    f.write_text(
        "\n".join(
            head + [line(0, "first")] + [line(i, "rewritten and much longer " * 3) for i in range(1, 5)]
        )
        + "\n"
    )
    assert f.stat().st_ino == ino  # rewritten in place
    r = subprocess.run(args, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-500:]
    assert "; 0 bad lines" in r.stdout and "format drift" not in r.stdout + r.stderr, r.stdout + r.stderr
    conn = sqlite3.connect(f"file:{tmp_path / 'store' / 'store.db'}?mode=ro", uri=True)
    try:
        assert conn.execute("SELECT count(*) FROM quarantine").fetchone()[0] == 0
        texts = {t for (t,) in conn.execute("SELECT text FROM chunks")}
    finally:
        conn.close()
    assert {f"first {i}" for i in range(3)} <= texts  # the first copy's, kept
    assert {f"{'rewritten and much longer ' * 3} {i}" for i in range(1, 5)} <= texts
