"""``secrets --scrub`` of a session whose agent died mid-line (newuser18 F18): the file,
idle past ``active_minutes``, ends in a line never ended; it was skipped ("the last
line is incomplete"), both keys left in it. Now the complete lines are scrubbed and the
torn last line is redacted on its bytes and left unended, as ingest holds it back."""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path

from typer.testing import CliRunner

from ctxkeep.cli import app
from fixtures.bad_input import line, rec

runner = CliRunner()
KEY_A = "sk_live_" + "A1b2C3d4E5f6G7h8I9j0K1l2"  # fake
KEY_Z = "sk_live_" + "Z9y8X7w6V5u4T3s2R1q0P9o8"  # fake


def test_a_torn_last_line_is_redacted_and_left_unended(tmp_path):
    home = tmp_path / "home"
    proj = home / ".claude/projects/-t"
    proj.mkdir(parents=True)
    f = proj / "34343434-0000-4000-8000-000000000034.jsonl"
    torn = line(rec(3, f"and the other key {KEY_Z} is", parent=2)).rstrip(b"\n")[:-30]
    assert KEY_Z.encode() in torn
    data = (line(rec(1, f"key {KEY_A} here")) + line(rec(2, "ok", parent=1))).replace(b"\n", b"\r\n") + torn
    f.write_bytes(data)
    t = time.time() - 2 * 86400
    os.utime(f, (t, t))
    e = {"HOME": str(home), "CTXKEEP_HOME": str(tmp_path / "store"), "CTXKEEP_IDLE_SECONDS": "0"}
    assert runner.invoke(app, ["ingest"], env=e).exit_code == 0
    mtime = f.stat().st_mtime_ns
    d = json.loads(runner.invoke(app, ["secrets", "--scrub", "--dry-run", "--json", str(f)], env=e).stdout)
    assert d["would_scrub"] == 1 and d["values"] == {"stripe-key": 2}, d
    d = json.loads(runner.invoke(app, ["secrets", "--scrub", "--json", str(f)], env=e).stdout)
    assert d["scrubbed"] == 1 and d["values"] == {"stripe-key": 2}, d
    new = f.read_bytes()
    assert KEY_A.encode() not in new and KEY_Z.encode() not in new
    assert new.count(b"\r\n") == 2 and not new.endswith(b"\n")  # the torn line left unended
    assert new.rsplit(b"\r\n", 1)[1] == torn.replace(KEY_Z.encode(), b"[REDACTED:stripe-key]")
    assert f.stat().st_mtime_ns == mtime
    assert Path(str(f) + ".backup").read_bytes() == data
    r = json.loads(runner.invoke(app, ["ingest", "--json"], env=e).stdout)
    assert r["entries_new"] == 0
    c = sqlite3.connect(tmp_path / "store" / "store.db")
    try:
        assert c.execute("SELECT count(*) FROM intents").fetchone()[0] == 0
        off = c.execute("SELECT offset FROM watermarks WHERE path = ?", (str(f),)).fetchone()[0]
    finally:
        c.close()
    assert off == len(new.rsplit(b"\r\n", 1)[0]) + 2  # still before the unended line
