"""``secrets --scrub`` and the vault (newuser15 F17, F18): the scrubbed file is the
vault's next generation, so the vault restores it whole after the agent wrote to it
again and deleted it, and ``vault status`` sees nothing at risk after the scrub."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from ctxkeep.maintenance.scrub import run_scrub
from ctxkeep.maintenance.vault import vault_restore, vault_status
from ctxkeep.pipeline.engine import run_ingest
from ctxkeep.sources.contract import DiscoveryContext

SID = "5c7ab0e2-1d4f-4b6e-9a3c-0f1e2d3c4b5a"
#: a value whose marker is longer than it: the scrubbed file grows (F17)
SECRET = "hunter2secretABC"


def _line(
    n: int, kind: str, text: str, *, sid: str = SID, cwd: str = "/tmp/p", day: str = "2025-06-01"
) -> bytes:
    """One Claude Code record (``user`` or ``assistant``) of session ``sid``, the ``n``-th
    of a chain; its uuids carry the session's first 8 characters."""
    rec: dict = {
        "type": kind,
        "sessionId": sid,
        "uuid": f"{sid[:8]}-0000-4000-8000-{n:012d}",
        "parentUuid": f"{sid[:8]}-0000-4000-8000-{n - 1:012d}" if n > 1 else None,
        "timestamp": f"{day}T10:00:{n:02d}.000Z",
        "cwd": cwd,
        "version": "2.0.1",
    }
    if kind == "user":
        rec["message"] = {"role": "user", "content": text}
    else:
        rec["message"] = {
            "id": f"msg_{sid[:8]}_{n}",
            "role": "assistant",
            "model": "claude-sonnet-4-20250514",
            "content": [{"type": "text", "text": text}],
        }
    return json.dumps(rec, separators=(",", ":")).encode() + b"\n"


def test_a_scrubbed_file_is_restored_whole_after_the_agent_wrote_to_it(tmp_path, monkeypatch):
    user = tmp_path / "user"
    p = user / ".claude" / "projects" / "-tmp-p" / f"{SID}.jsonl"
    p.parent.mkdir(parents=True)
    p.write_bytes(
        _line(1, "user", "hello")
        + _line(2, "assistant", "hi, what can I do")
        + _line(3, "user", f"my password={SECRET} keep it")
    )
    os.utime(p, (time.time() - 3600, time.time() - 3600))
    monkeypatch.setenv("HOME", str(user))
    store = tmp_path / "store"
    ctx = DiscoveryContext(home=user, env={})
    run_ingest(store, ctx=ctx)
    s = run_scrub(store, paths=[p])
    assert s["scrubbed"] == 1, s["files"]
    assert SECRET.encode() not in p.read_bytes()
    # nothing at risk: the vault holds the scrubbed file (F17)
    st = vault_status(store, ctx=ctx)
    assert st["at_risk"] == 0, st
    # the agent writes again; ingest reads the new line
    with open(p, "ab") as f:
        f.write(_line(4, "assistant", "noted, and a later reply"))
    os.utime(p, (time.time() - 3600, time.time() - 3600))
    assert run_ingest(store, ctx=ctx).entries_new == 1
    want = p.read_bytes()
    p.unlink()  # the agent's cleanup
    r = vault_restore(store, SID[:8], user_home=user)
    assert [Path(f["path"]) for f in r["files"]] == [p]
    assert p.read_bytes() == want  # was: "the vault holds it only from byte 1136"
    # a reparse from the vault (the scrubbed generation included) changes nothing
    from ctxkeep.maintenance.reparse import reparse

    d = reparse(store)["diff"]["entries"]
    assert d and all(e["added"] == e["removed"] == e["changed"] == 0 for e in d), d


def test_a_secret_in_an_unparsable_line_is_scrubbed_in_place(tmp_path, monkeypatch):
    """A torn line holding a secret (quarantined, redacted in the store) was dropped
    from the count: the file was called "clean" with the secret left in it (newuser15
    F12). It is redacted in its raw bytes, kept where it was."""
    user = tmp_path / "user"
    p = user / ".claude" / "projects" / "-tmp-p" / f"{SID}.jsonl"
    p.parent.mkdir(parents=True)
    torn = b'{"type":"user","message":{"content":"password=hunter2secretXYZ'
    p.write_bytes(_line(1, "user", "hello") + torn + b"\n" + _line(2, "assistant", "hi"))
    os.utime(p, (time.time() - 3600, time.time() - 3600))
    monkeypatch.setenv("HOME", str(user))
    store = tmp_path / "store"
    run_ingest(store, ctx=DiscoveryContext(home=user, env={}))
    dry = run_scrub(store, paths=[p], dry_run=True)
    assert dry["would_scrub"] == 1 and dry["values"] == {"password": 1}, dry["files"]
    s = run_scrub(store, paths=[p])
    assert s["scrubbed"] == 1, s["files"]
    lines = p.read_bytes().splitlines()
    assert b"hunter2secretXYZ" not in p.read_bytes() and len(lines) == 3
    assert lines[0] == _line(1, "user", "hello").rstrip() and lines[2] == _line(2, "assistant", "hi").rstrip()
    assert lines[1] == torn.replace(b"hunter2secretXYZ", b"[REDACTED:password]")
    assert run_ingest(store, ctx=DiscoveryContext(home=user, env={})).entries_new == 0
    # the store still holds every line of the file: compress's check finds the redacted
    # torn line by its redacted bytes (its raw hash is the unredacted line's)
    from ctxkeep.maintenance.compress.run import lines_not_held
    from ctxkeep.sinks import sqlite as sqlite_store
    from ctxkeep.sources.contract import SourceFile

    conn = sqlite_store.connect(store, readonly=True)
    try:
        assert lines_not_held(conn, SourceFile("claude-code", p), p.read_bytes()) == []
    finally:
        conn.close()
