"""Compress and a line that did not parse in the original (newuser15 F2, F6).

A crash mid-write leaves a torn line in an agent's file; ingest quarantines it. The
rewrite keeps it as it was, where it was, and judges only the lines it wrote: the file
is compressed (it was refused forever). A check or dry run says the refusal a real run
would make; a refused file leaves no ``.backup`` beside it."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from conftest import CORPUS_HOME
from ctxkeep.maintenance.compress import plan as cp
from ctxkeep.maintenance.compress import rewrite
from ctxkeep.maintenance.compress import run as ops
from ctxkeep.pipeline.engine import run_ingest
from ctxkeep.sinks import sqlite as sqlite_store

CODEX = ".codex/sessions/2025/11/13/rollout-2025-11-13T18-21-11-019a802a-aab1-7c31-9831-d2510c7a74a2.jsonl"
#: a torn line as a crash mid-write leaves it (with a secret: the quarantine holds it
#: redacted, the agent's file as it is)
TORN = b'{"timestamp":"2025-11-13T18:30:00.000Z","type":"response_item","payload":{"note":"password=hunter2secretXYZ'


def _home(tmp_path: Path, torn_at: int | None = None) -> tuple[Path, Path]:
    """A copy of one Codex rollout with ``TORN`` inserted before line ``torn_at`` (None:
    appended), an hour old, ingested into a new store. Returns (file, store)."""
    if not CORPUS_HOME.is_dir():
        pytest.skip("shared/corpus not present")
    d = tmp_path / "sess"
    d.mkdir()
    p = d / Path(CODEX).name
    shutil.copyfile(CORPUS_HOME / CODEX, p)
    lines = p.read_bytes().splitlines(keepends=True)
    at = len(lines) if torn_at is None else torn_at
    p.write_bytes(b"".join(lines[:at] + [TORN + b"\n"] + lines[at:]))
    os.utime(p, (time.time() - 3600, time.time() - 3600))
    store = tmp_path / "store"
    store.mkdir()
    (store / "config.toml").write_text("[compress]\nactive_minutes = 0\n")
    s = run_ingest(store, paths=[p])
    assert s.quarantined == 1
    return p, store


def _quarantine(store: Path) -> list[tuple]:
    conn = sqlite_store.connect(store, readonly=True)
    try:
        return conn.execute("SELECT path, offset, length, reason, raw_sha256 FROM quarantine").fetchall()
    finally:
        conn.close()


@pytest.mark.parametrize("torn_at", [None, 2])
def test_a_quarantined_line_is_kept_and_the_file_compressed(tmp_path, torn_at):
    p, store = _home(tmp_path, torn_at)
    orig = p.read_bytes()
    q = _quarantine(store)
    dry = ops.run_compress(store, paths=[p], keep_messages=40, dry_run=True)["files"][0]
    assert dry["status"] == "would-compress", dry["reason"]
    s = ops.run_compress(store, paths=[p], keep_messages=40)
    f = s["files"][0]
    assert f["status"] == "compressed", f["reason"]  # was: refused, "did not validate"
    assert (s["compressed"], s["refused"]) == (1, 0)
    new = p.read_bytes()
    assert len(new) < len(orig) and f["kept_bad_lines"] == 1 and f["dropped_bad_lines"] == 0
    lines = new.splitlines()
    # byte for byte, once, where it was: last when it was last; before the cut, among
    # the first kept lines (session_meta and context) when it was the third line
    assert lines.count(TORN) == 1
    at = lines.index(TORN)
    assert at == (len(lines) - 1 if torn_at is None else 2)
    assert Path(f["backup"]).read_bytes() == orig
    # the store is as before: the line quarantined once, as ingest met it
    assert _quarantine(store) == q
    assert run_ingest(store, paths=[p]).entries_new == 0
    # and the next compress is not refused either
    again = ops.run_compress(store, paths=[p], keep_messages=5)["files"][0]
    assert again["status"] == "compressed", again["reason"]
    assert p.read_bytes().splitlines().count(TORN) == 1


def _writes_a_bad_line(monkeypatch):
    """Make the plan write one line that does not parse (a defect of compress's own)."""
    real = cp.plan_compression

    def plan(*a, **k):
        pl = real(*a, **k)
        pl.new_lines.insert(1, b'{"type":"event_msg", "payload": oops')
        return pl

    monkeypatch.setattr(cp, "plan_compression", plan)


def test_check_and_dry_run_say_the_refusal_the_real_run_makes(tmp_path, monkeypatch):
    p, store = _home(tmp_path)
    _writes_a_bad_line(monkeypatch)
    dry = ops.run_compress(store, paths=[p], keep_messages=5, dry_run=True)
    f = dry["files"][0]
    assert f["status"] == "refused" and dry["refused"] == 1 and dry["would_compress"] == 0
    assert f["reason"].startswith("the compressed file would not validate: line 2 does not parse")
    chk = ops.check_files(store, paths=[p])["files"][0]
    assert chk["would"]["status"] == "refused" and chk["would"]["reason"] == f["reason"]
    orig = p.read_bytes()
    real = ops.run_compress(store, paths=[p], keep_messages=5)
    assert real["files"][0]["status"] == "refused" and real["files"][0]["reason"] == f["reason"]
    assert p.read_bytes() == orig
    assert sorted(x.name for x in p.parent.iterdir()) == [p.name]  # no backup, no temp file


def test_a_refused_rewrite_leaves_no_backup_and_keeps_the_older_ones(tmp_path, monkeypatch):
    """The file changes between the backup and the rename (an agent appends): nothing
    is replaced, the backup just made goes and the previous one keeps its name."""
    p, store = _home(tmp_path)
    assert ops.run_compress(store, paths=[p], keep_messages=40)["compressed"] == 1
    before = {b.name: b.read_bytes() for b in rewrite.backup_paths(p)}
    assert list(before) == [p.name + ".backup"]
    real = rewrite.make_backup

    def backup_then_append(path, *a, **k):
        out = real(path, *a, **k)
        with open(path, "ab") as fh:  # the agent writes meanwhile
            fh.write(b'{"type":"event_msg","payload":{"type":"agent_message","message":"late"}}\n')
        return out

    monkeypatch.setattr(rewrite, "make_backup", backup_then_append)
    os.utime(p, (time.time() - 3600, time.time() - 3600))
    f = ops.run_compress(store, paths=[p], keep_messages=5)["files"][0]
    assert f["status"] == "refused" and "changed while it was being compressed" in f["reason"]
    assert f["backup"] is None
    assert {b.name: b.read_bytes() for b in rewrite.backup_paths(p)} == before
    assert not [x for x in p.parent.iterdir() if rewrite.TMP_MARK in x.name]


def test_validation_judges_only_the_lines_the_rewrite_wrote():
    torn = b'{"a": 1, "b'
    data = b'{"x":1}\n' + torn + b"\n" + b'{"y":2}\n'
    assert rewrite.validate_jsonl(data, 3, kept_bad={torn}) == []
    assert rewrite.validate_jsonl(data, 3)[0].startswith("line 2 does not parse")
    other = data.replace(torn, b'{"a": 2, "b')  # not the original's line: judged
    assert rewrite.validate_jsonl(other, 3, kept_bad={torn})[0].startswith("line 2 does not parse")
