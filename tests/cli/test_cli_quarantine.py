"""``ctxkeep quarantine [list | show ID] [--json]`` (issue 15 "Missing everyday verbs":
quarantined lines were only visible through sqlite3)."""

from __future__ import annotations

import base64
import hashlib
import json

from typer.testing import CliRunner

from ctxkeep.cli import app
from tests.conftest import ingest

runner = CliRunner()
#: a GitHub token (the ``ghp_`` prefix and 36 characters of GitHub's documented format)
TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"


def _home_with_bad_lines(tmp_path):
    home = tmp_path / "agent-home"
    f = home / ".claude" / "projects" / "-w-app" / "s-q.jsonl"
    f.parent.mkdir(parents=True)
    good = {
        "type": "user",
        "uuid": "u1",
        "sessionId": "s-q",
        "cwd": "/w/app",
        "timestamp": "2025-06-01T10:00:00.000Z",
        "message": {"role": "user", "content": "hello"},
    }
    bad1 = (
        b'{"type": "user", "uuid": "u2", "message": {"content": "export GITHUB_TOKEN='
        + TOKEN.encode()
        + b'"\n'
    )
    bad2 = b"not json at all\n"
    data = (json.dumps(good) + "\n").encode() + bad1 + bad2
    f.write_bytes(data)
    return home, f, [(len(data) - len(bad2) - len(bad1), bad1), (len(data) - len(bad2), bad2)]


def test_list_and_show_quarantined_lines(tmp_path, store_home):
    home, f, bad = _home_with_bad_lines(tmp_path)
    s = ingest(home, store_home, "claude-code")
    assert s.quarantined == 2
    r = runner.invoke(app, ["quarantine", "list", "--home", str(store_home), "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["total"] == 2
    lines = sorted(d["lines"], key=lambda x: x["offset"])
    for got, (offset, raw) in zip(lines, bad, strict=True):
        assert (got["agent"], got["path"], got["offset"]) == ("claude-code", str(f), offset)
        line = raw.rstrip(b"\n")  # a line is stored and hashed without its newline
        assert got["raw_sha256"] == hashlib.sha256(line).hexdigest() and got["length"] == len(line)
        assert got["reason"].startswith("malformed JSON") and got["action"] == "skipped"
        assert got["first_seen"].endswith("Z")
        assert TOKEN not in got["preview"]
    # show: the bytes as stored, the token redacted; --json carries them exactly
    tok = lines[0]
    r = runner.invoke(app, ["quarantine", "show", str(tok["id"]), "--home", str(store_home)])
    assert r.exit_code == 0 and "export GITHUB_TOKEN=" in r.stdout and TOKEN not in r.stdout
    assert f"@ {tok['offset']:,}" in r.stderr
    j = json.loads(
        runner.invoke(app, ["quarantine", "show", str(tok["id"]), "--home", str(store_home), "--json"]).stdout
    )
    assert base64.b64decode(j["raw_base64"]).decode() == j["raw_text"] and TOKEN not in j["raw_text"]
    assert j["raw_text"].startswith('{"type": "user", "uuid": "u2"')
    # the default subcommand is list; filters and errors
    t = runner.invoke(app, ["quarantine", "--home", str(store_home)])
    assert t.exit_code == 0 and "2 lines" in t.stdout
    assert (
        json.loads(
            runner.invoke(
                app, ["quarantine", "list", "--agent", "codex", "--home", str(store_home), "--json"]
            ).stdout
        )["total"]
        == 0
    )
    r = runner.invoke(app, ["quarantine", "show", "999999", "--home", str(store_home)])
    assert r.exit_code == 1 and r.stderr.startswith("error: no quarantined line 999999")
