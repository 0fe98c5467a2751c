"""``ingest --dry-run``'s bytes and ``ingest``'s are two measures, and each says which
(newuser17 F19: "would read 27 files, 8.8 MB" then "ingested … (8.0 MB, 3,665 records)":
the dry run counts the files' new bytes on disk, the ingest the bytes of the records it
read: a database's rows, not its file; a JSONL's complete lines)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from ctxkeep.cli import app


def test_the_dry_run_says_its_bytes_are_on_disk(tmp_path):
    proj = tmp_path / "home" / ".claude" / "projects" / "-tmp-b"
    proj.mkdir(parents=True)
    rec = {"type": "user", "uuid": "u1", "sessionId": "b1", "timestamp": "2025-01-01T00:00:01Z",
           "cwd": "/tmp/b", "message": {"role": "user", "content": "hello"}}  # fmt: skip
    (proj / "s.jsonl").write_text(json.dumps(rec) + "\n" + '{"type": "user", "partial')  # a torn tail
    size = (proj / "s.jsonl").stat().st_size
    env = {"HOME": str(tmp_path / "home"), "COLUMNS": "80"}
    r = CliRunner().invoke(
        app, ["ingest", "--dry-run", "--home", str(tmp_path / "s"), "--agent", "claude-code"], env=env
    )
    assert r.exit_code == 0, r.output
    flat = " ".join(r.stdout.split())
    assert f"would read 1 file, {size} B on disk" in flat, flat
    assert "ingest counts the bytes of the records it reads" in flat, flat
